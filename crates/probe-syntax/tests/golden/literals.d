BEGIN
{
	x = 42;
	x = 0x2A;
	x = 052;
	x = 42u;
	x = 42ul;
	x = 42LL;
	x = 18446744073709551615;
	x = 'a';
	x = '\n';
	x = '\0';
	s = "tab\there \"quoted\" \\ \x41\101";
	s = "con" "cat";
	s = $1; s = $$2; s = $target; s = $pid;
}
