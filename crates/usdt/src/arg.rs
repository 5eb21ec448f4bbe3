//! Probe argument types: how a Rust value becomes one SDT argument (a register holding an integer
//! or a pointer) and what size/signedness its argument spec declares.
//!
//! The SystemTap SDT note describes each argument as `SIZE@LOCATION`, where SIZE is the byte width
//! (1, 2, 4 or 8) negated for signed values (sys/sdt.h, `_SDT_ARGFMT`; SystemTap wiki
//! "UserSpaceProbeImplementation"). [`Arg::SPEC`] is that number. Pointers (strings, JSON) are
//! unsigned 8-byte values.
//!
//! Byte slices (`&[u8]`) are not an [`Arg`]: the [`provider!`](crate::provider) macro recognises the
//! type `&[u8]` and passes it as two arguments, the data pointer and the length.

use core::ffi::CStr;

/// Largest number of bytes of a `&str` argument copied into the NUL-terminated buffer the probe
/// passes (longer strings are cut at this many bytes, possibly inside a UTF-8 sequence).
///
/// DTrace's default `strsize` is 256 bytes including the NUL; this is the same bound.
pub const STR_MAX: usize = 255;

/// A Rust type that can be passed as one SDT probe argument.
///
/// Implemented for `u8`..`u64`, `i8`..`i64`, `usize`, `isize`, `bool` (1 byte, 0 or 1), `char`
/// (4 bytes, the Unicode scalar value), raw pointers, `&str` (pointer to a bounded NUL-terminated
/// copy, see [`STR_MAX`]), `&CStr` (its own pointer, no copy) and, with the `json` feature,
/// [`Json<T>`] (pointer to a NUL-terminated JSON text). 128-bit integers have no SDT size (the format
/// knows 1, 2, 4 and 8 bytes): pass them as two `u64` halves.
///
/// [`Arg::stage`] runs only when the probe is enabled: it is where copies are built.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a USDT probe argument",
    note = "probe arguments are integers, bool, char, raw pointers, &str, &CStr, &[u8] (written exactly \
            so in the probe declaration) or Json<T> for any serde::Serialize T"
)]
pub trait Arg {
    /// The argument's SDT size: byte width 1, 2, 4 or 8, negative when the value is signed.
    const SPEC: i8;
    /// What lives on the stack while the probe fires (the value itself, or the buffer a pointer
    /// points into).
    type Staged: Staged;
    /// Builds the staged form. Called only when the probe is enabled.
    fn stage(self) -> Self::Staged;
}

/// The staged form of an argument: it yields the 64-bit word placed in the argument's register.
///
/// The word of a pointer argument points into `self`, so the staged value must stay alive (and
/// unmoved) until the probe site has executed; the generated code keeps it in a local until then.
pub trait Staged {
    /// The register value: the integer (sign- or zero-extended to 64 bits) or the pointer.
    fn word(&self) -> u64;
}

impl Staged for u64 {
    #[inline(always)]
    fn word(&self) -> u64 {
        *self
    }
}

macro_rules! int_arg {
    ($($t:ty => $spec:expr, $via:ty;)*) => {$(
        impl Arg for $t {
            const SPEC: i8 = $spec;
            type Staged = u64;
            #[inline(always)]
            fn stage(self) -> u64 {
                // Sign-extend signed values, zero-extend unsigned ones; only the low |SPEC| bytes
                // are read by consumers.
                self as $via as u64
            }
        }
    )*};
}

int_arg! {
    u8 => 1, u64;
    u16 => 2, u64;
    u32 => 4, u64;
    u64 => 8, u64;
    usize => 8, u64;
    i8 => -1, i64;
    i16 => -2, i64;
    i32 => -4, i64;
    i64 => -8, i64;
    isize => -8, i64;
}

// usize/isize are declared 8 bytes: true on every target this crate emits notes for (x86-64 and
// aarch64 Linux); elsewhere no note is written, so the size is never read.

impl Arg for bool {
    const SPEC: i8 = 1;
    type Staged = u64;
    #[inline(always)]
    fn stage(self) -> u64 {
        u64::from(self)
    }
}

impl Arg for char {
    const SPEC: i8 = 4;
    type Staged = u64;
    #[inline(always)]
    fn stage(self) -> u64 {
        u64::from(u32::from(self))
    }
}

impl<T: ?Sized> Arg for *const T {
    const SPEC: i8 = 8;
    type Staged = u64;
    #[inline(always)]
    fn stage(self) -> u64 {
        self.cast::<u8>() as usize as u64
    }
}

impl<T: ?Sized> Arg for *mut T {
    const SPEC: i8 = 8;
    type Staged = u64;
    #[inline(always)]
    fn stage(self) -> u64 {
        self.cast::<u8>() as usize as u64
    }
}

/// A `&CStr` is already NUL-terminated: its own pointer is passed, nothing is copied.
impl Arg for &CStr {
    const SPEC: i8 = 8;
    type Staged = u64;
    #[inline(always)]
    fn stage(self) -> u64 {
        self.as_ptr() as usize as u64
    }
}

/// A bounded NUL-terminated copy of a `&str` (at most [`STR_MAX`] bytes, then a NUL), built on the
/// stack only when the probe is enabled. A NUL inside the string ends it early for consumers.
#[derive(Debug)]
pub struct StrCopy {
    buf: [u8; STR_MAX + 1],
}

impl StrCopy {
    /// Copies at most [`STR_MAX`] bytes of `s` and terminates them with a NUL.
    #[inline]
    pub fn new(s: &str) -> Self {
        let mut buf = [0u8; STR_MAX + 1];
        let n = s.len().min(STR_MAX);
        buf[..n].copy_from_slice(&s.as_bytes()[..n]);
        StrCopy { buf }
    }

    /// The copied bytes up to (not including) the first NUL.
    pub fn as_bytes(&self) -> &[u8] {
        let end = self.buf.iter().position(|&b| b == 0).unwrap_or(STR_MAX);
        &self.buf[..end]
    }
}

impl Staged for StrCopy {
    #[inline(always)]
    fn word(&self) -> u64 {
        self.buf.as_ptr() as usize as u64
    }
}

impl Arg for &str {
    const SPEC: i8 = 8;
    type Staged = StrCopy;
    #[inline(always)]
    fn stage(self) -> StrCopy {
        StrCopy::new(self)
    }
}

/// A probe argument passed as the NUL-terminated JSON text of a `serde::Serialize` value
/// (serde_json's compact form), serialized only when the probe is enabled.
///
/// Declare it as `Json<&MyType>` (or `Json<MyType>` to move the value in) and fire it with
/// `Json(&value)`. JSON never contains a raw NUL (serde_json escapes control characters), so the
/// consumer reads the whole text. If serialization fails (say, a map with non-string keys), the
/// argument is the JSON object `{"error":"<serde_json's message>"}` instead.
#[cfg(feature = "json")]
#[derive(Debug, Clone, Copy)]
pub struct Json<T>(pub T);

/// The staged form of a [`Json`] argument: the JSON text and its terminating NUL.
#[cfg(feature = "json")]
#[derive(Debug)]
pub struct JsonText {
    bytes: Vec<u8>,
}

#[cfg(feature = "json")]
impl JsonText {
    /// Serializes `value` to compact JSON followed by a NUL.
    pub fn new<T: serde::Serialize + ?Sized>(value: &T) -> Self {
        let mut bytes = serde_json::to_vec(value).unwrap_or_else(|e| {
            serde_json::to_vec(&serde_json::json!({ "error": e.to_string() }))
                .expect("serializing a JSON object of one string cannot fail")
        });
        bytes.push(0);
        JsonText { bytes }
    }

    /// The JSON text without its NUL.
    pub fn as_str(&self) -> &str {
        let text = &self.bytes[..self.bytes.len() - 1];
        core::str::from_utf8(text).expect("serde_json writes UTF-8")
    }
}

#[cfg(feature = "json")]
impl Staged for JsonText {
    #[inline(always)]
    fn word(&self) -> u64 {
        self.bytes.as_ptr() as usize as u64
    }
}

#[cfg(feature = "json")]
impl<T: serde::Serialize> Arg for Json<T> {
    const SPEC: i8 = 8;
    type Staged = JsonText;
    #[inline]
    fn stage(self) -> JsonText {
        JsonText::new(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_specs_and_extension() {
        assert_eq!(<u8 as Arg>::SPEC, 1);
        assert_eq!(<i16 as Arg>::SPEC, -2);
        assert_eq!(<u32 as Arg>::SPEC, 4);
        assert_eq!(<i64 as Arg>::SPEC, -8);
        assert_eq!(<isize as Arg>::SPEC, -8);
        assert_eq!((-1i8).stage(), u64::MAX);
        assert_eq!(255u8.stage(), 255);
        assert_eq!(i32::MIN.stage() as i64, i32::MIN as i64);
        assert_eq!(true.stage(), 1);
        assert_eq!('é'.stage(), 0xe9);
    }

    #[test]
    fn str_copy_is_bounded_and_terminated() {
        let s = "x".repeat(STR_MAX + 40);
        let c = StrCopy::new(&s);
        assert_eq!(c.as_bytes().len(), STR_MAX);
        assert_eq!(c.buf[STR_MAX], 0);
        let short = StrCopy::new("héllo");
        assert_eq!(short.as_bytes(), "héllo".as_bytes());
        assert_eq!(StrCopy::new("a\0b").as_bytes(), b"a");
    }

    #[cfg(feature = "json")]
    #[test]
    fn json_text_and_error_object() {
        let t = Json(&serde_json::json!({"k": [1, 2]})).stage();
        assert_eq!(t.as_str(), r#"{"k":[1,2]}"#);
        assert_eq!(*t.bytes.last().unwrap(), 0);
        let mut bad = std::collections::BTreeMap::new();
        bad.insert((1, 2), 3);
        let e = Json(&bad).stage();
        assert!(e.as_str().starts_with(r#"{"error":"#), "{}", e.as_str());
    }
}
