//! The declaration and firing macros: [`provider!`](crate::provider) and [`probe!`](crate::probe).
//!
//! `provider!` walks each probe's argument list with a token muncher (`__usdt_probe`) that builds,
//! argument by argument, the pieces of the probe site: the parameter list, the staging statements
//! (string copies, JSON), the argument-spec template, and the `asm!` operands. The architecture's
//! site macro (`__usdt_site`, in `site.rs`) then assembles the note and the nop.

/// Declares a USDT provider and its probes, with typed arguments.
///
/// ```
/// use sightline_usdt::Json;
///
/// #[derive(serde::Serialize)]
/// struct Job { id: u64, queue: &'static str }
///
/// sightline_usdt::provider! {
///     /// Probes of the job runner.
///     pub mod jobrunner {
///         /// A job was taken from a queue: job id, queue name, payload bytes.
///         fn job__start(id: u64, queue: &str, payload: &[u8]);
///         /// A job finished: its id and whether it succeeded.
///         fn job__done(id: u64, ok: bool);
///         /// The whole job as JSON (serialized only when the probe is enabled).
///         fn job__json(job: Json<&Job>);
///         /// No arguments.
///         fn idle();
///     }
/// }
///
/// # fn main() {
/// let job = Job { id: 7, queue: "mail" };
/// jobrunner::job__start::fire(job.id, job.queue, b"hello");   // eager: arguments always evaluated
/// sightline_usdt::probe!(jobrunner::job__done, || (job.id, true)); // closure: evaluated only when enabled
/// sightline_usdt::probe!(jobrunner::job__json(Json(&job)));     // call form: also lazy
/// if jobrunner::idle::is_enabled() {
///     jobrunner::idle::fire();
/// }
/// assert_eq!(jobrunner::PROVIDER, "jobrunner");
/// assert_eq!(jobrunner::job__start::ARG_SIZES, &[8, 8, 8, 8]);
/// # }
/// ```
///
/// # What it generates
///
/// `mod PROVIDER` (with the given visibility) holding `PROVIDER: &str`, the static `SEMAPHORES`
/// (one [`Semaphore`](crate::Semaphore) field per probe, page-aligned in `.probes`, see
/// docs/usdt.md) and, per probe, a module named after the probe with:
///
/// - `semaphore() -> &'static Semaphore`: the probe's semaphore, a `u16` in the `.probes` section,
///   non-zero while a tracer has the probe enabled (see [`Semaphore`](crate::Semaphore));
/// - `is_enabled() -> bool`: reads the semaphore (one relaxed load);
/// - `fire(args...)`: when enabled, stages the arguments and executes the probe site;
/// - `NAME: &str`, `ARGS: &[(&str, &str)]` (declared name and type of each argument) and
///   `ARG_SIZES: &[i8]` (the SDT size of each note argument, after `&[u8]` became two).
///
/// Each inlined call of `fire` is one probe site: a 5-byte nop plus one `.note.stapsdt` note
/// (several sites per probe name are normal, as with sys/sdt.h).
///
/// # Argument types
///
/// Any [`Arg`](crate::Arg) (integers, `bool`, `char`, raw pointers, `&str`, `&CStr`,
/// [`Json<T>`](crate::Json)), plus `&[u8]` written literally, which becomes two note arguments
/// (pointer, then length in bytes). At most 12 note arguments (sys/sdt.h's limit and the number of
/// registers the site can use). Probe names use `__` where DTrace shows `-` (`job__start` is
/// `job-start`), as sys/sdt.h users do.
///
/// Item names in argument types resolve as in the module around the macro (each generated module
/// does `use super::*`), so declare providers at module level, not inside a function body (names
/// local to a function are not visible to `super::*`).
#[macro_export]
macro_rules! provider {
    (
        $(#[$pmeta:meta])*
        $vis:vis mod $provider:ident {
            #![stability = $stability:literal]
            $(
                $(#[$meta:meta])*
                fn $probe:ident ( $($args:tt)* ) ;
            )*
        }
    ) => {
        $crate::provider! {
            @provider [$stability]
            $(#[$pmeta])*
            $vis mod $provider {
                $(
                    $(#[$meta])*
                    fn $probe ( $($args)* ) ;
                )*
            }
        }
    };
    (
        $(#[$pmeta:meta])*
        $vis:vis mod $provider:ident {
            $(
                $(#[$meta:meta])*
                fn $probe:ident ( $($args:tt)* ) ;
            )*
        }
    ) => {
        $crate::provider! {
            @provider ["Private/Private/Unknown"]
            $(#[$pmeta])*
            $vis mod $provider {
                $(
                    $(#[$meta])*
                    fn $probe ( $($args)* ) ;
                )*
            }
        }
    };
    (
        @provider [$stability:literal]
        $(#[$pmeta:meta])*
        $vis:vis mod $provider:ident {
            $(
                $(#[$meta:meta])*
                fn $probe:ident ( $($args:tt)* ) ;
            )*
        }
    ) => {
        $(#[$pmeta])*
        #[allow(non_snake_case, dead_code)]
        $vis mod $provider {
            #[allow(unused_imports)]
            use super::*;
            /// The provider name written in this provider's SDT notes.
            pub const PROVIDER: &str = ::core::stringify!($provider);

            /// The provider's declared stability attributes, `Name/Data/Class` (DTrace guide,
            /// "Stability"), written into each probe's `.note.sightline` note; for the provider,
            /// probe name and arguments (`Private/Private/Unknown` when not declared).
            pub const STABILITY: &str = $stability;
            const _: () = ::core::assert!(
                $crate::__valid_stability(STABILITY),
                "provider! stability must be Name/Data/Class, e.g. \"Evolving/Evolving/Common\""
            );

            /// The provider's semaphores, one per probe, on a page of their own: the kernel's
            /// uprobe reference counter then never meets the page mapped twice (docs/usdt.md,
            /// "The lld layout").
            #[derive(Debug)]
            #[cfg_attr(
                all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")),
                repr(C, align(4096))
            )]
            #[cfg_attr(
                not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))),
                repr(C)
            )]
            pub struct Semaphores {
                $(
                    #[doc = ::core::concat!("Semaphore of probe `", ::core::stringify!($probe), "`.")]
                    pub $probe: $crate::Semaphore,
                )*
            }

            /// This provider's semaphores, in the `.probes` section.
            #[cfg_attr(
                all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")),
                unsafe(link_section = ".probes")
            )]
            pub static SEMAPHORES: Semaphores = Semaphores {
                $( $probe: $crate::Semaphore::new(), )*
            };
            $(
                $crate::__usdt_probe! {
                    @head [$provider $probe [$(#[$meta])*] $stability]
                    @names [] @types [] @stage [] @tmpl [] @pos [] @named [] @sizes [] @decl []
                    @note []
                    @sep [""]
                    @rest $($args)*
                }
            )*
        }
    };
}

/// Token muncher behind [`provider!`]: one step per declared argument. Not a public interface.
#[doc(hidden)]
#[macro_export]
macro_rules! __usdt_probe {
    // A byte slice: two note arguments, the data pointer (8 bytes) and the length (8 bytes).
    (
        @head $head:tt
        @names [$($nm:tt)*] @types [$($ty:tt)*] @stage [$($st:tt)*] @tmpl [$($tm:tt)*]
        @pos [$($po:tt)*] @named [$($na:tt)*] @sizes [$($sz:tt)*] @decl [$($de:tt)*]
        @note [$($no:tt)*]
        @sep [$sep:literal]
        @rest $name:ident : & [u8] $(, $($rest:tt)*)?
    ) => {
        $crate::__usdt_probe! {
            @head $head
            @names [$($nm)* $name,]
            @types [$($ty)* [&[u8]]]
            @stage [$($st)*]
            @tmpl [$($tm)* $crate::__usdt_spec_slice!($sep $name),]
            @pos [$($po)* in(reg) $name.len() as u64,]
            @named [$($na)* $name = in(reg) $name.as_ptr() as usize as u64,]
            @sizes [$($sz)* 8, 8,]
            @decl [$($de)* (::core::stringify!($name), "&[u8]"),]
            @note [$($no)* $crate::__usdt_note_slice!($name),]
            @sep [" "]
            @rest $($($rest)*)?
        }
    };
    // Any other type: one note argument through the `Arg` trait.
    (
        @head $head:tt
        @names [$($nm:tt)*] @types [$($ty:tt)*] @stage [$($st:tt)*] @tmpl [$($tm:tt)*]
        @pos [$($po:tt)*] @named [$($na:tt)*] @sizes [$($sz:tt)*] @decl [$($de:tt)*]
        @note [$($no:tt)*]
        @sep [$sep:literal]
        @rest $name:ident : $t:ty $(, $($rest:tt)*)?
    ) => {
        $crate::__usdt_probe! {
            @head $head
            @names [$($nm)* $name,]
            @types [$($ty)* [$t]]
            @stage [$($st)* let $name = <$t as $crate::Arg>::stage($name);]
            @tmpl [$($tm)* $crate::__usdt_spec_arg!($sep $name),]
            @pos [$($po)* const <$t as $crate::Arg>::SPEC,]
            @named [$($na)* $name = in(reg) $crate::Staged::word(&$name),]
            @sizes [$($sz)* <$t as $crate::Arg>::SPEC,]
            @decl [$($de)* (::core::stringify!($name), ::core::stringify!($t)),]
            @note [$($no)* $crate::__usdt_note_arg!($name $t),]
            @sep [" "]
            @rest $($($rest)*)?
        }
    };
    // All arguments done: the probe's module.
    (
        @head [$provider:ident $probe:ident [$($meta:tt)*] $stability:literal]
        @names [$($nm:ident,)*] @types [$([$($ty:tt)*])*] @stage [$($st:tt)*] @tmpl [$($tm:tt)*]
        @pos [$($po:tt)*] @named [$($na:tt)*] @sizes [$($sz:tt)*] @decl [$($de:tt)*]
        @note [$($no:tt)*]
        @sep [$sep:literal]
        @rest
    ) => {
        $($meta)*
        #[allow(non_snake_case, dead_code)]
        pub mod $probe {
            #[allow(unused_imports)]
            use super::*;

            /// The probe name written in the SDT note (`__` is shown as `-` by DTrace-style tools).
            pub const NAME: &str = ::core::stringify!($probe);

            /// Declared arguments: (name, Rust type) in order.
            pub const ARGS: &[(&str, &str)] = &[$($de)*];

            /// SDT size of each note argument in order: byte width, negative when signed
            /// (`&[u8]` contributes two: pointer and length).
            pub const ARG_SIZES: &[i8] = &[$($sz)*];

            /// The probe's semaphore (a field of the provider's `SEMAPHORES`, in `.probes`):
            /// non-zero while a tracer enables the probe.
            #[inline(always)]
            pub fn semaphore() -> &'static $crate::Semaphore {
                &super::SEMAPHORES.$probe
            }

            /// True while a tracer has this probe enabled (its semaphore is non-zero).
            #[inline(always)]
            pub fn is_enabled() -> bool {
                super::SEMAPHORES.$probe.is_enabled()
            }

            /// Fires the probe if it is enabled: stages the arguments (string copies, JSON) and
            /// executes the probe site. The arguments themselves are evaluated by the caller; use
            /// `sightline_usdt::probe!` to evaluate them only when the probe is enabled.
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            pub fn fire($($nm: $($ty)*),*) {
                if super::SEMAPHORES.$probe.is_enabled() {
                    self::__fire_enabled($($nm,)*)
                }
            }

            /// The site without the semaphore test, for `probe!`, which has just tested it.
            #[doc(hidden)]
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            pub fn __fire_enabled($($nm: $($ty)*),*) {
                $($st)*
                $crate::__usdt_site! {
                    [$provider $probe] [$($tm)*] [$($po)*] [$($na)*] [$stability [$($no)*]]
                }
            }

            #[doc(hidden)]
            #[inline(always)]
            pub fn __fire_tuple(($($nm,)*): ($($($ty)*,)*)) {
                self::__fire_enabled($($nm,)*)
            }
        }
    };
}

/// Fires a probe declared with [`provider!`], evaluating its arguments only when it is enabled.
///
/// Two forms, both compiled to one semaphore load and a not-taken branch while the probe is
/// disabled:
///
/// - closure form: `probe!(provider::probe, || (arg0, arg1))`; the closure returns the arguments
///   as a tuple of exactly the declared types (write `s.as_str()` for a `String`);
/// - call form: `probe!(provider::probe(arg0, arg1))`; the argument expressions are evaluated,
///   with the usual coercions, only when enabled.
///
/// ```
/// sightline_usdt::provider! {
///     mod app {
///         fn request(path: &str, bytes: u32);
///     }
/// }
/// let path = String::from("/index.html");
/// sightline_usdt::probe!(app::request, || (path.as_str(), 512));
/// sightline_usdt::probe!(app::request(&path, path.len() as u32));
/// ```
#[macro_export]
macro_rules! probe {
    ($($probe:ident)::+ , $closure:expr $(,)?) => {
        if $($probe)::+::is_enabled() {
            $($probe)::+::__fire_tuple(($closure)())
        }
    };
    ($($probe:ident)::+ ( $($arg:expr),* $(,)? )) => {
        if $($probe)::+::is_enabled() {
            $($probe)::+::__fire_enabled($($arg),*)
        }
    };
}
