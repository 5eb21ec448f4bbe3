BEGIN
{
	printf("%d %d\n", 1);
	printf("%d\n", 1, 2);
	printf("%s\n", pid);
	printf("%d\n", execname);
	printf("%q\n", 1);
	printf(execname);
	printf("%f\n", 1);
	printf("%c\n", arg0);
	printf("%@d\n", 1);
	printa("%s %s %@d\n", @x);
	trace(trace(1));
	exit("no");
}
END { @x[pid] = count(); }
END { @y[execname] = count(); @z[pid] = sum(1); printa(@x, @y); printa(@x, @z); }
tick-1s { printf("%Y\n", pid); }
