/* A USDT probe whose arguments are the high-byte registers %ah, %bh, %ch and %dh (issue 21):
 * sl_hi:::bytes fires 3 times with arg0 = 0x12, arg1 = (int8_t)0x80, arg2 = 0x7f, arg3 = i.
 *
 * Compilers never choose these registers for <sys/sdt.h> arguments, so the note is written by hand,
 * as <sys/sdt.h> lays it out (SystemTap wiki, "UserSpaceProbeImplementation": an NT_STAPSDT note
 * of owner "stapsdt" holding the probe address, the address of `_.stapsdt.base`, the semaphore
 * address, then provider, name and argument strings). This also keeps the workload free of the
 * systemtap-sdt-dev headers. */

int main(void) {
    for (int i = 0; i < 3; i++) {
        __asm__ __volatile__("movl $0x1234, %%eax\n\t"
                             "movl $0x80ff, %%ebx\n\t"
                             "movl $0x7f00, %%ecx\n\t"
                             "movl %0, %%edx\n\t"
                             "shll $8, %%edx\n"
                             "990: nop\n\t"
                             ".pushsection .note.stapsdt, \"?\", \"note\"\n\t"
                             ".balign 4\n\t"
                             ".4byte 992f-991f, 994f-993f, 3\n"
                             "991: .asciz \"stapsdt\"\n"
                             "992: .balign 4\n"
                             "993: .8byte 990b\n\t"
                             ".8byte _.stapsdt.base\n\t"
                             ".8byte 0\n\t"
                             ".asciz \"sl_hi\"\n\t"
                             ".asciz \"bytes\"\n\t"
                             ".asciz \"1@%%ah -1@%%bh 1@%%ch 1@%%dh\"\n"
                             "994: .balign 4\n\t"
                             ".popsection\n\t"
                             ".ifndef _.stapsdt.base\n\t"
                             ".pushsection .stapsdt.base, \"aG\", \"progbits\", .stapsdt.base, comdat\n\t"
                             ".weak _.stapsdt.base\n\t"
                             ".hidden _.stapsdt.base\n"
                             "_.stapsdt.base: .space 1\n\t"
                             ".size _.stapsdt.base, 1\n\t"
                             ".popsection\n\t"
                             ".endif\n"
                             :
                             : "r"(i)
                             : "eax", "ebx", "ecx", "edx");
    }
    return 0;
}
