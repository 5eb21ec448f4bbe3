syscall:::entry
{
	@calls[execname, probefunc] = count();
}

tick-1s
{
	printa("%-16s %-16s %@8d\n", @calls);
	exit(0);
}
