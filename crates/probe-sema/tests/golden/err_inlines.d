inline int A = B;
inline int B = A;
inline string S = 1;
inline int N = 1;
inline int N = 2;

BEGIN
{
	x = A;
	y = S;
	N = 3;
}
