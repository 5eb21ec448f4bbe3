BEGIN
{
	system("ls");
	raise(9);
	stop();
	trace();
	exit();
	stack(0);
	x = stack();
	y = nosuchfunc(1);
	z = strlen(1);
	w = copyinstr(execname);
	*arg0;
	v = &x;
	pid = 1;
	1 + 2;
}
END { ENOENT = 3; }
END { s = stringof(stack()); }
