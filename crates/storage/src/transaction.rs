//! The bound a transaction's body meets, named once for both backends' `write_transaction`.
//!
//! diesel-async asks of a transaction's body an async closure whose future is `Send`, through a
//! trait of its own that it does not export; a function that hands a body on to it has to state
//! the same bound, so this is that trait, which every such closure meets as it meets theirs.

/// An async closure taking `T` to `R` whose future can be named (and so bounded `Send`).
pub(crate) trait TransactionBody<T, R>:
    AsyncFnOnce(T) -> R + FnOnce(T) -> <Self as TransactionBody<T, R>>::Fut
{
    /// The future calling the closure returns.
    type Fut: Future<Output = R>;
}

impl<F, T, Fut, R> TransactionBody<T, R> for F
where
    F: AsyncFnOnce(T) -> R + FnOnce(T) -> Fut,
    Fut: Future<Output = R>,
{
    type Fut = Fut;
}
