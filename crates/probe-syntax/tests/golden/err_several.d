/* Several errors in one file: each is reported, parsing continues after each. */
BEGIN
{
	x = 1 +;
	y = (2 * 3;
	z = 09;
}

syscall::read:entry
/pid == /
{
	@a[execname] = ;
	trace(1);
}

a:b:c:d:e { }

END
{
	printf("%d\n", 1) trace(2);
	q = 'ab';
}
