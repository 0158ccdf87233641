//! The target: which ISA code is generated for, and with which settings. The one
//! place that chooses; the lowering only asks the ISA for its pointer type and
//! calling convention, so the same lowering can later feed an object file for
//! another target (aarch64 through cranelift-object) built from [`isa_for`].

use cranelift_codegen::ir::types;
use cranelift_codegen::isa::{self, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};

use crate::error::CompileError;

/// The two ISAs of one target: the same machine and calling conventions, with
/// Cranelift's optimising settings (`speed`) and its quick ones (`quick`: no
/// e-graph optimisation, the single-pass register allocator), whose compile time
/// and memory grow linearly with the function where `speed`'s grow faster (a
/// function of 10^4 blocks takes seconds with `speed`). The JIT compiles a
/// function with `quick` when it is larger than
/// [`CompileOptions::quick_above`](crate::CompileOptions::quick_above).
pub(crate) struct Isas {
    pub speed: OwnedTargetIsa,
    pub quick: OwnedTargetIsa,
}

/// The settings every gradlift target gets; `quick` for large functions.
fn flags(quick: bool) -> Result<settings::Flags, CompileError> {
    let mut b = settings::builder();
    let set = |b: &mut settings::Builder, name: &str, value: &str| {
        b.set(name, value).map_err(|e| CompileError::Codegen {
            func: None,
            message: format!("setting {name}={value}: {e}"),
        })
    };
    if quick {
        set(&mut b, "opt_level", "none")?;
        set(&mut b, "regalloc_algorithm", "single_pass")?;
    } else {
        set(&mut b, "opt_level", "speed")?;
    }
    // Cranelift's own verifier checks the lowering's output before and after
    // its passes: on in debug builds (the tests), where it catches a lowering
    // bug at its source; off in release builds, where it was 8% of the time to
    // compile a rule (`mlp`'s, measured with perf) and checks nothing a tested
    // lowering can get wrong at run time.
    set(
        &mut b,
        "enable_verifier",
        if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        },
    )?;
    // Functions return every result of the IR function, slices as two values each:
    // more than fit in registers go through a hidden return area.
    set(&mut b, "enable_multi_ret_implicit_sret", "true")?;
    // cranelift-jit needs these: code is placed anywhere in memory, and calls to
    // Rust helpers and libcalls use absolute addresses.
    set(&mut b, "is_pic", "false")?;
    set(&mut b, "use_colocated_libcalls", "false")?;
    Ok(settings::Flags::new(b))
}

/// The host's ISAs, with the features the CPU has (cranelift-native).
pub(crate) fn host_isa() -> Result<Isas, CompileError> {
    let builder = || {
        cranelift_native::builder().map_err(|m| CompileError::Codegen {
            func: None,
            message: format!("the host machine is not supported: {m}"),
        })
    };
    Ok(Isas {
        speed: finish(builder()?, false)?,
        quick: finish(builder()?, true)?,
    })
}

/// The ISAs for the target `triple` (baseline features), for emitting code for
/// another machine.
pub(crate) fn isa_for(triple: target_lexicon::Triple) -> Result<Isas, CompileError> {
    let builder = || {
        isa::lookup(triple.clone()).map_err(|e| CompileError::Codegen {
            func: None,
            message: format!("unsupported target: {e}"),
        })
    };
    Ok(Isas {
        speed: finish(builder()?, false)?,
        quick: finish(builder()?, true)?,
    })
}

fn finish(builder: isa::Builder, quick: bool) -> Result<OwnedTargetIsa, CompileError> {
    let isa = builder
        .finish(flags(quick)?)
        .map_err(|e| CompileError::Codegen {
            func: None,
            message: format!("building the ISA: {e}"),
        })?;
    if isa.pointer_type() != types::I64 {
        return Err(CompileError::Codegen {
            func: None,
            message: format!("only 64-bit targets are supported, not {}", isa.triple()),
        });
    }
    Ok(isa)
}
