/* struct, union and enum definitions: alone, inside declarations and typedefs, nested. */
struct point { int x, y; char name[8]; struct point *next; };
union u { char c; long l; };
enum color { RED, GREEN = 5, BLUE };
typedef struct pair { int a; int b; } pair_t;
struct rec { struct { char ch; int in; } inner; enum { A, B } kind; } var;
BEGIN { trace(sizeof(struct point)); trace(GREEN); }
int arr[5], n;
