//! [`forward_transport!`](crate::forward_transport): a wrapper around a transport
//! writes only the [`Transport`](crate::Transport) methods it changes.

/// Inside `impl Transport for Wrapper { ... }`: every method of
/// [`Transport`](crate::Transport) not named after `except`, forwarded to the field
/// given first (a name, or `0` for a tuple struct), which holds a transport (a
/// `T: Transport`, a `Box<dyn Transport>`). A method after `except` that the trait
/// gives a default (`wait_all`, ...) keeps that default unless the wrapper writes it.
///
/// ```
/// use ngauge_transport::{Rank, Region, Transport, TransportError};
///
/// /// Counts the sends; everything else is the wrapped transport's.
/// struct Counting<T> {
///     inner: T,
///     sends: u64,
/// }
///
/// impl<T: Transport> Transport for Counting<T> {
///     ngauge_transport::forward_transport!(inner, except send);
///     fn send(&mut self, peer: Rank, region: Region) -> Result<(), TransportError> {
///         self.sends += 1;
///         self.inner.send(peer, region)
///     }
/// }
/// ```
///
/// A method the trait gains is forwarded by every wrapper at once: the table below
/// is the one place to add it.
#[macro_export]
macro_rules! forward_transport {
    ($field:tt $(, except $($own:ident),+)?) => {
        $crate::forward_transport!(@each $field [$($($own)+)?]
            (ref name() -> &'static str)
            (ref rank() -> $crate::Rank)
            (ref size() -> usize)
            (ref capabilities() -> $crate::Capabilities)
            (ref wait_mode() -> $crate::WaitMode)
            (ref buffers() -> &dyn $crate::Buffers)
            (mut buffers_mut() -> &mut dyn $crate::Buffers)
            (mut alloc_buffer(len: usize) -> $crate::forward::Res<$crate::BufferId>)
            (mut free_buffer(buffer: $crate::BufferId) -> $crate::forward::Res<()>)
            (ref buffer(buffer: $crate::BufferId) -> $crate::forward::Res<&[u8]>)
            (mut buffer_mut(buffer: $crate::BufferId) -> $crate::forward::Res<&mut [u8]>)
            (mut send(peer: $crate::Rank, region: $crate::Region) -> $crate::forward::Res<()>)
            (mut recv(peer: $crate::Rank, region: $crate::Region) -> $crate::forward::Res<()>)
            (mut isend(peer: $crate::Rank, region: $crate::Region)
                -> $crate::forward::Res<$crate::RequestId>)
            (mut irecv(peer: $crate::Rank, region: $crate::Region)
                -> $crate::forward::Res<$crate::RequestId>)
            (mut test(request: $crate::RequestId) -> $crate::forward::Res<bool>)
            (mut wait(request: $crate::RequestId) -> $crate::forward::Res<()>)
            (mut wait_all(requests: &[$crate::RequestId]) -> $crate::forward::Res<()>)
            (mut native_round_trips(peer: $crate::Rank, send: $crate::Region,
                recv: $crate::Region, role: $crate::NativeRole<'_>)
                -> $crate::forward::OptRes<()>)
            (mut native_stream(peer: $crate::Rank, send: $crate::Region,
                recv: $crate::Region, window: usize, messages: usize, sender: bool)
                -> $crate::forward::OptRes<()>)
            (mut native_collective(call: $crate::NativeCollective)
                -> $crate::forward::OptRes<()>)
            (mut start_native_collective(call: $crate::NativeCollective)
                -> $crate::forward::OptRes<$crate::RequestId>)
            (ref counters() -> $crate::Counters)
            (mut settle() -> $crate::forward::Res<()>)
        );
    };
    (@each $f:tt $own:tt) => {};
    (@each $f:tt $own:tt $method:tt $($rest:tt)*) => {
        $crate::forward_transport!(@skip $f $method $own);
        $crate::forward_transport!(@each $f $own $($rest)*);
    };
    // A method in the `except` list is the wrapper's own.
    (@skip $f:tt ($k:ident $m:ident $($sig:tt)*) []) => {
        $crate::forward_transport!(@def $f $k $m $($sig)*);
    };
    (@skip $f:tt ($k:ident name $($s:tt)*) [name $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident rank $($s:tt)*) [rank $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident size $($s:tt)*) [size $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident capabilities $($s:tt)*) [capabilities $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident wait_mode $($s:tt)*) [wait_mode $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident buffers $($s:tt)*) [buffers $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident buffers_mut $($s:tt)*) [buffers_mut $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident alloc_buffer $($s:tt)*) [alloc_buffer $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident free_buffer $($s:tt)*) [free_buffer $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident buffer $($s:tt)*) [buffer $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident buffer_mut $($s:tt)*) [buffer_mut $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident send $($s:tt)*) [send $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident recv $($s:tt)*) [recv $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident isend $($s:tt)*) [isend $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident irecv $($s:tt)*) [irecv $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident test $($s:tt)*) [test $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident wait $($s:tt)*) [wait $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident wait_all $($s:tt)*) [wait_all $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident native_round_trips $($s:tt)*) [native_round_trips $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident native_stream $($s:tt)*) [native_stream $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident native_collective $($s:tt)*) [native_collective $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident start_native_collective $($s:tt)*)
        [start_native_collective $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident counters $($s:tt)*) [counters $($r:ident)*]) => {};
    (@skip $f:tt ($k:ident settle $($s:tt)*) [settle $($r:ident)*]) => {};
    (@skip $f:tt $method:tt [$x:ident $($r:ident)*]) => {
        $crate::forward_transport!(@skip $f $method [$($r)*]);
    };
    // `self` in the signature and in the body come from one transcriber (hygiene).
    (@def $f:tt ref $m:ident($($a:ident: $t:ty),*) -> $ret:ty) => {
        fn $m(&self $(, $a: $t)*) -> $ret {
            use $crate::Transport as _;
            self.$f.$m($($a),*)
        }
    };
    (@def $f:tt mut $m:ident($($a:ident: $t:ty),*) -> $ret:ty) => {
        fn $m(&mut self $(, $a: $t)*) -> $ret {
            use $crate::Transport as _;
            self.$f.$m($($a),*)
        }
    };
}

/// A transport operation's result, for the signatures the macro writes.
#[doc(hidden)]
pub type Res<T> = Result<T, crate::TransportError>;

/// What a transport's own loop or collective returns, for the same.
#[doc(hidden)]
pub type OptRes<T> = Option<Res<T>>;
