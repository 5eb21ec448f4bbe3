pid:/usr/lib/libc.so.6:a:b:c:entry { }
pid:/usr/lib/libc.so.6 { }
pid:/usr/bin/bash, syscall::read:entry { }
syscall::read:/pid / 2 == 1/{ trace(1); }
syscall::read:/pid/ { }
