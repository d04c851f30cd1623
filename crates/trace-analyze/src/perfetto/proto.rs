//! The subset of Perfetto's trace protos that `trace merge` writes, declared
//! by hand for `prost` with the official field numbers (no `protoc` needed).
//!
//! Each message cites its `.proto` file under `protos/perfetto/trace/` in
//! the Perfetto repository; only the fields ranktune writes are declared, so
//! decoding a trace made by another producer skips the rest (protobuf's rule
//! for unknown fields). Repeated scalars are `packed = "false"`, as proto2
//! (which Perfetto's protos are) encodes them.
//!
//! Owns: the wire layout. It must never hold logic: the conversion from
//! Chrome events lives in the parent module.

/// `trace.proto`: `message Trace { repeated TracePacket packet = 1; }`.
/// A trace file is this message: packets concatenated, each framed as
/// field 1 (tag byte `0x0A`) and its length.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Trace {
    /// `packet = 1`.
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `trace_packet.proto`: `message TracePacket` (the fields used here).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// `optional uint64 timestamp = 8;` nanoseconds on the trace clock.
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// `uint32 trusted_packet_sequence_id = 10;` (in the oneof
    /// `optional_trusted_packet_sequence_id`): the writer's sequence, which
    /// scopes interned strings. ranktune uses one sequence per rank.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// `TrackEvent track_event = 11;`
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// `optional InternedData interned_data = 12;`
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// `optional uint32 sequence_flags = 13;` see [`SEQ_INCREMENTAL_STATE_CLEARED`].
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// `TrackDescriptor track_descriptor = 60;`
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED = 1`.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE = 2`.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `track_event/track_descriptor.proto`: `message TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// `optional uint64 uuid = 1;`
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// `optional string name = 2;`
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// `optional ProcessDescriptor process = 3;`
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// `optional ThreadDescriptor thread = 4;`
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// `optional uint64 parent_uuid = 5;`
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    /// `optional CounterDescriptor counter = 8;`
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
}

/// `track_event/process_descriptor.proto`: `message ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// `optional int32 pid = 1;`
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// `optional int32 legacy_sort_index = 3;`
    #[prost(int32, optional, tag = "3")]
    pub legacy_sort_index: Option<i32>,
    /// `optional string process_name = 6;`
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `track_event/thread_descriptor.proto`: `message ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    /// `optional int32 pid = 1;`
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// `optional int32 tid = 2;`
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    /// `optional int32 legacy_sort_index = 3;`
    #[prost(int32, optional, tag = "3")]
    pub legacy_sort_index: Option<i32>,
    /// `optional string thread_name = 5;`
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `track_event/counter_descriptor.proto`: `message CounterDescriptor`.
/// Its presence makes a counter track; ranktune sets none of its fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CounterDescriptor {}

/// `track_event/track_event.proto`: `message TrackEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// `repeated uint64 category_iids = 3;` (interned `EventCategory`).
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    /// `repeated DebugAnnotation debug_annotations = 4;` (the event's args).
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// `optional Type type = 9;` see [`TYPE_SLICE_BEGIN`] and the others.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// `optional uint64 track_uuid = 11;`
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// `repeated string categories = 22;` (non-interned).
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    /// `oneof name_field { uint64 name_iid = 10; string name = 23; }`
    #[prost(oneof = "NameField", tags = "10, 23")]
    pub name_field: Option<NameField>,
    /// `oneof counter_value_field { int64 counter_value = 30; double
    /// double_counter_value = 44; }` (only the double is written).
    #[prost(double, optional, tag = "44")]
    pub double_counter_value: Option<f64>,
    /// `repeated fixed64 flow_ids = 47;`
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// `repeated fixed64 terminating_flow_ids = 48;`
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `TrackEvent.name_field`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum NameField {
    /// `uint64 name_iid = 10;` (interned `EventName`).
    #[prost(uint64, tag = "10")]
    NameIid(u64),
    /// `string name = 23;`
    #[prost(string, tag = "23")]
    Name(String),
}

/// `TrackEvent.Type.TYPE_SLICE_BEGIN = 1`.
pub const TYPE_SLICE_BEGIN: i32 = 1;
/// `TrackEvent.Type.TYPE_SLICE_END = 2`.
pub const TYPE_SLICE_END: i32 = 2;
/// `TrackEvent.Type.TYPE_INSTANT = 3`.
pub const TYPE_INSTANT: i32 = 3;
/// `TrackEvent.Type.TYPE_COUNTER = 4`.
pub const TYPE_COUNTER: i32 = 4;

/// `track_event/debug_annotation.proto`: `message DebugAnnotation`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// `oneof name_field { uint64 name_iid = 1; string name = 10; }`
    #[prost(oneof = "AnnotationName", tags = "1, 10")]
    pub name_field: Option<AnnotationName>,
    /// `oneof value { bool bool_value = 2; uint64 uint_value = 3; int64
    /// int_value = 4; double double_value = 5; string string_value = 6; …
    /// string legacy_json_value = 9; }`
    #[prost(oneof = "AnnotationValue", tags = "2, 3, 4, 5, 6, 9")]
    pub value: Option<AnnotationValue>,
}

/// `DebugAnnotation.name_field`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AnnotationName {
    /// `uint64 name_iid = 1;` (interned `DebugAnnotationName`).
    #[prost(uint64, tag = "1")]
    NameIid(u64),
    /// `string name = 10;`
    #[prost(string, tag = "10")]
    Name(String),
}

/// `DebugAnnotation.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AnnotationValue {
    /// `bool bool_value = 2;`
    #[prost(bool, tag = "2")]
    Bool(bool),
    /// `uint64 uint_value = 3;`
    #[prost(uint64, tag = "3")]
    Uint(u64),
    /// `int64 int_value = 4;`
    #[prost(int64, tag = "4")]
    Int(i64),
    /// `double double_value = 5;`
    #[prost(double, tag = "5")]
    Double(f64),
    /// `string string_value = 6;`
    #[prost(string, tag = "6")]
    String(String),
    /// `string legacy_json_value = 9;` (arrays, objects, null: raw JSON).
    #[prost(string, tag = "9")]
    Json(String),
}

/// `interned_data/interned_data.proto`: `message InternedData` (the fields
/// used here).
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// `repeated EventCategory event_categories = 1;`
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<InternedString>,
    /// `repeated EventName event_names = 2;`
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedString>,
    /// `repeated DebugAnnotationName debug_annotation_names = 3;`
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedString>,
}

/// `EventCategory`, `EventName` (track_event.proto) and
/// `DebugAnnotationName` (debug_annotation.proto) share one layout:
/// `optional uint64 iid = 1; optional string name = 2;`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedString {
    /// `optional uint64 iid = 1;`
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// `optional string name = 2;`
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}
