//! The row kernel `t += a·b` on x86-64 with BMI2 and ADX: `mulx` forms each limb product
//! without touching the flags, and two independent carry chains run through `adcx` (CF: the
//! products' high limbs) and `adox` (OF: the limbs of `t`), eight limbs per loop pass. This is
//! the inner loop of every Montgomery product and square, so it sets Paillier's speed.
//!
//! Constant time: the instructions and the loop count depend only on the slice lengths.
#![allow(unsafe_code)]

/// One limb of the row at byte offset `off`: `lo:h_out = a[j]·b`, then
/// `t[j] = lo + h_in + CF + t[j] + OF` on the two chains.
macro_rules! limb {
    ($h_in:literal, $h_out:literal, $off:literal) => {
        concat!(
            "mulx {",
            $h_out,
            "}, {lo}, [{a} + ",
            $off,
            "]\n",
            "adcx {lo}, {",
            $h_in,
            "}\n",
            "adox {lo}, [{t} + ",
            $off,
            "]\n",
            "mov [{t} + ",
            $off,
            "], {lo}",
        )
    };
}

/// Proof that the running CPU has BMI2 (`mulx`) and ADX (`adcx`, `adox`); only
/// [`Adx::detect`] makes one, so [`Adx::addmul_1`] never runs those instructions elsewhere.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Adx(());

impl Adx {
    /// The token if this CPU has BMI2 and ADX (checked once; the standard library caches it).
    pub(crate) fn detect() -> Option<Self> {
        (std::is_x86_feature_detected!("bmi2") && std::is_x86_feature_detected!("adx"))
            .then_some(Self(()))
    }

    /// `t[..a.len()] += a·b`, returning the limb carried out. `t` must be at least as long
    /// as `a`.
    #[inline(always)]
    pub(crate) fn addmul_1(self, t: &mut [u64], a: &[u64], b: u64) -> u64 {
        let t = &mut t[..a.len()];
        // The first `len % 4` limbs in Rust, so the assembly runs whole blocks of four.
        let head = a.len() % 4;
        let mut carry = super::addmul_1_portable(&mut t[..head], &a[..head], b);
        let blocks = a.len() / 4;
        if blocks == 0 {
            return carry;
        }
        // One block of four if their count is odd, then pairs of blocks (eight limbs a pass).
        let (single, pairs) = (blocks % 2, blocks / 2);
        let (tp, ap) = (t[head..].as_mut_ptr(), a[head..].as_ptr());
        // SAFETY: `Adx` exists only where `detect` saw BMI2 and ADX. `ap` points to
        // `4·blocks` readable limbs of `a` and `tp` to as many writable limbs of `t` (both
        // slices were cut to `a.len()` = `head + 4·blocks`, and `t` does not alias `a`: one
        // is `&mut`). The code reads `[ap, ap + 32·blocks)` and reads/writes
        // `[tp, tp + 32·blocks)` only; it uses no stack, and `lea`, `mov`, `mulx`, `jz` and
        // `jrcxz` leave CF and OF alone between the `adcx`/`adox` steps.
        unsafe {
            core::arch::asm!(
                "xor {zero:e}, {zero:e}",
                // Clears CF and OF (both chains start empty) and sets ZF if no single block.
                "test {single}, {single}",
                "jz 2f",
                limb!("hi", "h0", "0"),
                limb!("h0", "hi", "8"),
                limb!("hi", "h0", "16"),
                limb!("h0", "hi", "24"),
                "lea {a}, [{a} + 32]",
                "lea {t}, [{t} + 32]",
                // `jrcxz` reaches only 127 bytes: it jumps to a `jmp` that leaves.
                "2:",
                "jrcxz 4f",
                "jmp 5f",
                "4:",
                "jmp 3f",
                "5:",
                limb!("hi", "h0", "0"),
                limb!("h0", "hi", "8"),
                limb!("hi", "h0", "16"),
                limb!("h0", "hi", "24"),
                limb!("hi", "h0", "32"),
                limb!("h0", "hi", "40"),
                limb!("hi", "h0", "48"),
                limb!("h0", "hi", "56"),
                "lea {a}, [{a} + 64]",
                "lea {t}, [{t} + 64]",
                "lea rcx, [rcx - 1]",
                "jrcxz 3f",
                "jmp 5b",
                "3:",
                // The row's true result has one more limb than `a`, so the last high limb
                // plus both pending carries cannot overflow.
                "adcx {hi}, {zero}",
                "adox {hi}, {zero}",
                a = inout(reg) ap => _,
                t = inout(reg) tp => _,
                hi = inout(reg) carry,
                h0 = out(reg) _,
                lo = out(reg) _,
                zero = out(reg) _,
                single = in(reg) single,
                in("rdx") b,
                inout("rcx") pairs => _,
                options(nostack),
            );
        }
        carry
    }
}
