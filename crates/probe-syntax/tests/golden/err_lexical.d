BEGIN
{
	x = 0x;
	y = 12abc;
	s = "bad \q escape";
	z = a ` b;
	/* unterminated comment
}
