// args: hello world
syscall::read:entry
/pid == $target/
{
	a = $3;
	b = $1;
	c = $nosuch;
}

pid$target:::entry { }
