// args: 42 bash 0x10 -7
BEGIN
{
	a = $1;
	b = $$2;
	c = $3 + $4;
	d = $pid;
	e = $$0;
	trace($$1);
	exit(0);
}
