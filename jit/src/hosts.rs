//! Host functions: Rust functions bound to the `extern` functions of a module
//! ([`Hosts`]), called from compiled code.
//!
//! A host function takes the arguments as [`Val`]s (slices as copies of their
//! contents) and returns the results, or a message saying why it failed. What it
//! writes into a `mut` slice argument is copied back into the caller's buffer (it
//! must keep the length); writes into a read-only slice are dropped. These are the
//! interpreter's rules ([`Interpreter::bind_extern`]), and [`Hosts::bind_to`] binds
//! the same functions on an interpreter, so both engines run one program alike.
//!
//! A call to a host function packs its arguments into `Val`s, so it allocates;
//! write hot code in IR (or trace it) and keep host functions for what IR cannot
//! say. A host function that panics fails the call with
//! [`JitErrorKind::ExternFailed`](crate::JitErrorKind::ExternFailed); the panic does not cross
//! compiled code.

use std::collections::HashMap;
use std::sync::Arc;

use gradlift_ir::interp::{BindError, Interpreter, Val};

/// The type of a host function.
pub type HostFn = dyn Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync;

/// Rust functions for the `extern` functions of a module, by name (without `@`).
///
/// ```
/// use gradlift_ir::{interp::Val, parse};
/// use gradlift_jit::{Hosts, Workspace, compile_with};
///
/// let module = parse("
///     extern @hypot(f64, f64) -> f64
///     func @f(%x: f64) -> f64 {
///     entry:
///         %h = call @hypot(%x, 4.0)
///         ret %h
///     }
/// ").unwrap();
/// let hosts = Hosts::new().bind("hypot", |a: &mut [Val]| match a {
///     [Val::F64(x), Val::F64(y)] => Ok(vec![Val::F64(x.hypot(*y))]),
///     _ => Err("hypot takes two f64".to_string()),
/// });
/// let f = module.func_by_name("f").unwrap();
/// let compiled = compile_with(&module, &[f], &hosts).unwrap();
/// let out = compiled.call(&mut Workspace::new(), f, &mut [Val::F64(3.0)]).unwrap();
/// assert_eq!(out, [Val::F64(5.0)]);
/// ```
#[derive(Clone, Default)]
pub struct Hosts {
    fns: HashMap<String, Arc<HostFn>>,
}

impl core::fmt::Debug for Hosts {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut names: Vec<&str> = self.fns.keys().map(String::as_str).collect();
        names.sort_unstable();
        f.debug_struct("Hosts").field("bound", &names).finish()
    }
}

impl Hosts {
    /// No host functions.
    pub fn new() -> Hosts {
        Hosts::default()
    }

    /// Binds the extern function `name` (without `@`) to `f`, replacing an earlier
    /// binding of that name.
    pub fn bind(
        mut self,
        name: &str,
        f: impl Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    ) -> Hosts {
        self.insert(name, f);
        self
    }

    /// [`Hosts::bind`] in place.
    pub fn insert(
        &mut self,
        name: &str,
        f: impl Fn(&mut [Val]) -> Result<Vec<Val>, String> + Send + Sync + 'static,
    ) {
        self.fns.insert(name.to_string(), Arc::new(f));
    }

    /// The function bound to `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<HostFn>> {
        self.fns.get(name)
    }

    /// Whether no function is bound.
    pub fn is_empty(&self) -> bool {
        self.fns.is_empty()
    }

    /// Binds every function here on `engine` as well (those its module declares
    /// `extern`; the others are skipped), so that the interpreter runs the same
    /// program the JIT compiled.
    pub fn bind_to(&self, engine: &mut Interpreter<'_>) {
        for (name, f) in &self.fns {
            let f = Arc::clone(f);
            match engine.bind_extern(name, move |a| f(a)) {
                Ok(()) | Err(BindError::NoSuchFunction(_) | BindError::NotExtern(_)) => {}
            }
        }
    }
}
