BEGIN
{
	x = 1;
	x = "string";
	s = execname;
	s = pid;
	t = execname + 1;
	u = execname == 1;
	v = -execname;
	w = !execname;
	s += "x";
	c = pid ? execname : 1;
	k[1] = 2;
	k["a"] = 3;
	k[1, 2] = 4;
}

syscall::read:entry
/execname/
{
	trace(1);
}
