BEGIN
{
	printf("hello
	exit(0);
}
