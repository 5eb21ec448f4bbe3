// A Rust USDT probe with a semaphore, written by hand (provider "rs", name "hit", one argument), for
// tests: linked by rustc's default linker (lld), its semaphore shares a file page with the RELRO
// segment, so the kernel's reference counter misses it under -c. Prints how many iterations saw
// the semaphore set.
use std::arch::asm;

#[unsafe(no_mangle)]
#[used]
// In `.data.*` (merged into `.data`, whose start shares a file page with the RELRO segment in
// lld's layout) rather than `.probes`, whose place after `.data` depends on the size of `.data`.
#[unsafe(link_section = ".data.rs_hit_semaphore")]
pub static mut rs_hit_semaphore: u16 = 0;

#[inline(never)]
fn hit(i: u64) {
    // SAFETY: the asm is a nop plus note-section data; it reads `i` from a register and touches
    // no memory.
    unsafe {
        asm!(
            "990: nop",
            ".pushsection .note.stapsdt, \"\", \"note\"",
            ".balign 4",
            ".4byte 992f-991f, 994f-993f, 3",
            "991: .asciz \"stapsdt\"",
            "992: .balign 4",
            "993: .8byte 990b",
            ".8byte _.stapsdt.base",
            ".8byte rs_hit_semaphore",
            ".asciz \"rs\"",
            ".asciz \"hit\"",
            ".asciz \"8@{0}\"",
            "994: .balign 4",
            ".popsection",
            ".ifndef _.stapsdt.base",
            ".pushsection .stapsdt.base, \"aG\", \"progbits\", .stapsdt.base, comdat",
            ".weak _.stapsdt.base",
            ".hidden _.stapsdt.base",
            "_.stapsdt.base: .space 1",
            ".size _.stapsdt.base, 1",
            ".popsection",
            ".endif",
            in(reg) i,
            options(att_syntax),
        );
    }
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    // Optional: milliseconds to sleep after each iteration (a long-running target for -p).
    let pause: u64 = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(0);
    let mut enabled = 0;
    for i in 0..n {
        if pause > 0 {
            std::thread::sleep(std::time::Duration::from_millis(pause));
        }
        // SAFETY: a volatile read of a u16 static that only the tracer (through the kernel or
        // /proc/PID/mem) writes; this single thread never forms a reference to it.
        if unsafe { std::ptr::read_volatile(&raw const rs_hit_semaphore) } != 0 {
            enabled += 1;
            hit(i);
        }
    }
    println!("{enabled}");
}
