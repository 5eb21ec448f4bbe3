struct bits { int a : ; };
struct s { int a; int };
enum { 1 };
