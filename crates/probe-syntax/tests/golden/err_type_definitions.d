struct bits { int a : 3; };
struct s { int a; int };
enum { 1 };
