/* Every binary operator against its neighbours in C's precedence table (D adds ^^). */
BEGIN
{
	a = 1 + 2 * 3;
	a = 1 * 2 + 3;
	a = 1 - 2 - 3;
	a = 8 / 4 / 2 % 3;
	a = 1 << 2 + 3;
	a = 1 < 2 << 3;
	a = 1 == 2 < 3;
	a = 1 & 2 == 3;
	a = 1 ^ 2 & 3;
	a = 1 | 2 ^ 3;
	a = 1 && 2 | 3;
	a = 1 ^^ 2 && 3;
	a = 1 || 2 ^^ 3;
	a = 1 ? 2 : 3 ? 4 : 5;
	a = b = c += 1;
	a = -x * !y + ~z;
	a = (1 + 2) * 3;
	a = x++ + ++y;
	a = *p;
	a = (int)x + 1;
	a = (unsigned long long)x;
	a = (uint64_t)-1;
	a = sizeof (int) + sizeof x;
	a = stringof x;
	a = c ? x : y = 2;
	a <<= 1; a >>= 1; a &= 1; a |= 1; a ^= 1; a -= 1; a *= 2; a /= 2; a %= 2;
	x--; --x;
}
