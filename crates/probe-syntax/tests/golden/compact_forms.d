syscall::read:entry/pid == 1/{trace(1)}
BEGIN{printf("%d\n", 1)}END{exit(0)}
syscall::read:entry /pid == 1/
tick-1s { }
BEGIN // a comment before the body
{
	a = b ? c : d ? e : f;
	x = -1 < 0;
	if (x) @[pid] = count();
	s = "héllo \u00e9";
}
/* leading comment */ profile-1001hz,tick-10ms{@=count()}
syscall::write:entry,
{
	trace(2);
}
