/* Typical mistakes of a DTrace user (analysis errors). */
BEGIN
{
	printf("%d\n");
	printf("%s\n", pid);
	trace(execnam);
	x = 1;
	x = "hello";
	@q = quantize(1, 2, 3);
	@l = lquantize(arg0, 0);
	@ok1 = quantize(arg0, 2);
	@ok2 = lquantize(arg0, 0, 10);
	printf("%d %d\n", 1, 2, 3);
}
syscall::opnat:entry
{
	@ = count();
}
syscall::read:entry
/pid = 123/
{
	@ = count();
}
