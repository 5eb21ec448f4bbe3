BEGIN
{
	x = 1;

END
{
	trace(x);
}
