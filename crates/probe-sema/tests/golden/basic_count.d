// target: 1234
syscall::getpid:entry
/pid == $target/
{
	@ = count();
}
