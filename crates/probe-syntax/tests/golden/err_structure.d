} BEGIN { x = 1; }
syscall::read:entry
/pid == 1
{
	trace(1);
}
int;
self int 5;
int a[string;
tick-1s trace(1);
END
{
	y = 2;
#pragma D option quiet
}
int initialized = 5;
