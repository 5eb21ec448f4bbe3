BEGIN
{
	x = 1
	y = 2;
	printf("%d\n", x)
	exit(0);
}
