syscall::read:entry
/arg2 / 2 > 10/
{
	trace(arg2);
}

syscall::write:entry
/(arg2 / 2) > 10/
{
	trace(arg2);
}
