#pragma D option switchrate=10hz
#pragma D option bufsize=16m
BEGIN
{
	x = 1 << 70;
	x;
	trace(x);
}
