//! One named entry of a manifest's section, as read.

/// One named entry of a section; `raw` is `None` when it failed to
/// deserialize (its error is already reported, but its name still counts as
/// declared so references to it do not cascade into more errors).
pub(crate) struct Entry<T> {
    pub(crate) name: String,
    pub(crate) raw: Option<T>,
}
