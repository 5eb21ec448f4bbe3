/* Module fields given as a file path: the probes of that file in every process that maps it. */
pid:/usr/lib/x86_64-linux-gnu/libc.so.6:malloc:entry
/arg0 > 1024/
{
	@[ustack()] = count();
}
python:/usr/bin/python3.11::function-return,
pid$target:/usr/lib/*/libc.so.?:free:return/arg1 == 0/
{
	@calls[copyinstr(arg0)] = count();
}
/* Predicates and division right after a description are unchanged. */
syscall:::/pid == $target/{ @n = count(); }
syscall::read:/(pid / 2) == 1/{ trace(1); }
syscall::write:entry /(arg2 / 2) > 1/ { x = arg2 / 4; }
pid:/opt/app/bin:/main:entry { }
