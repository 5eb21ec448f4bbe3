/* Every statement form: empty, expression, aggregation (keyed, unkeyed, anonymous), if/else with
   blocks and single statements, nested if, and the optional `;` before `}`. */
this int t;
inline int MAX = 1 << 4;
BEGIN
{
	;
	x = 1;
	x++;
	trace(x);
	@ = count();
	@a = sum(x);
	@b[x, "k"] = max(x);
	if (x) trace(1);
	if (x) { trace(1); trace(2); } else { trace(3); }
	if (x) if (y) trace(1); else trace(2);
	if (x == 1) { } else if (x == 2) { trace(2) } else trace(3);
	exit(0)
}
:::END,dtrace:::ERROR{printa(@b)}
