/* Typical mistakes of a DTrace user (parse errors); see probe-sema's err_user_mistakes.d for the rest. */
BEGIN
{
	x = 1
	y = 2
}
syscall::read:entry
{
	@x = count;
	@t = sum;
}
tick-1s
{
	x = 1 }
END
{
	/* forgot to close
	exit(0);
}
