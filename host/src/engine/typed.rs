//! A component function whose type was checked once, when its instance was made, so that each
//! call need not check it again (a check walks the whole request and verdict types: for the
//! calls on the hot path it would cost more than the copy of a small request). What `bindgen!`
//! does for the functions it binds, for the 0.3 functions called over 0.2's types.
// `TypedFunc::new_unchecked` is unsafe by its signature; the check in `Checked::new` is what
// makes it sound, and this module is the whole of it.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use wasmtime::component::{ComponentNamedList, Func, Lift, Lower, TypedFunc};
use wasmtime::AsContext;

/// A function signature, its parameters for any borrow.
pub(super) trait Sig {
    type Params<'a>: ComponentNamedList + Lower + Send + Sync;
    type Results: ComponentNamedList + Lift + Send + Sync + 'static;
}

/// `func`, checked to have signature `S`.
pub(super) struct Checked<S> {
    func: Func,
    sig: PhantomData<fn() -> S>,
}

impl<S> Clone for Checked<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Checked<S> {}

impl<S: Sig> Checked<S> {
    /// `func`, if it has signature `S`.
    pub(super) fn new(func: Func, store: impl AsContext) -> wasmtime::Result<Checked<S>> {
        func.typed::<S::Params<'_>, S::Results>(store)?;
        Ok(Checked {
            func,
            sig: PhantomData,
        })
    }

    /// The typed function, for parameters of any borrow.
    pub(super) fn typed<'a>(&self) -> TypedFunc<S::Params<'a>, S::Results> {
        // SAFETY: `new` checked the function against `S`, whose types differ from these only
        // in the borrow's lifetime, which the component model's type check does not see.
        unsafe { TypedFunc::new_unchecked(self.func) }
    }
}
