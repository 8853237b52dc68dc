//! The protobuf codec of every generated server and client: tonic-prost's, except that a
//! message that does not decode (a string that is not UTF-8, a truncated or mistyped field) is
//! INVALID_ARGUMENT instead of INTERNAL. It is the sender's input that is wrong, and prost's
//! message names the field (`failed to decode Protobuf message: Scope.user_id: invalid string
//! value: data is not UTF-8 encoded`).

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstEncoder};

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct ProtoCodec<T, U> {
    _types: PhantomData<(T, U)>,
}

impl<T, U> Default for ProtoCodec<T, U> {
    fn default() -> Self {
        Self { _types: PhantomData }
    }
}

impl<T, U> Codec for ProtoCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProtoDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProtoDecoder { _type: PhantomData }
    }
}

/// Decodes `U`, answering INVALID_ARGUMENT when the bytes are not a valid `U`.
#[derive(Debug, Clone)]
pub struct ProtoDecoder<U> {
    _type: PhantomData<U>,
}

impl<U: Message + Default> Decoder for ProtoDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        U::decode(buf)
            .map(Some)
            .map_err(|err| Status::invalid_argument(err.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};

    use super::*;

    #[test]
    fn invalid_utf8_is_invalid_argument_naming_the_field() {
        // Field 1 (user_id) of a Scope, length-delimited, with bytes that are not UTF-8.
        let mut bytes = BytesMut::new();
        bytes.put_slice(&[0x0a, 0x02, 0xff, 0xfe]);
        let err = crate::common::Scope::decode(bytes.freeze()).unwrap_err();
        let status = Status::invalid_argument(err.to_string());
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().contains("Scope.user_id"), "{}", status.message());
    }
}

/// Raw protobuf bytes in and out, for callers that must send what a typed client cannot: the
/// fuzzer and the bad-input bench send malformed messages on purpose
/// (`tonic::client::Grpc::unary(request, path, RawCodec)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

/// The encoder of [`RawCodec`]: the bytes as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawEncoder;

/// The decoder of [`RawCodec`]: every byte of the message.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        RawEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawDecoder
    }
}

impl tonic::codec::Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, buf: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), Self::Error> {
        prost::bytes::BufMut::put_slice(buf, &item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        let remaining = prost::bytes::Buf::remaining(buf);
        Ok(Some(prost::bytes::Buf::copy_to_bytes(buf, remaining).to_vec()))
    }
}

/// The wire bytes of a message (for [`RawCodec`] callers that corrupt them).
pub fn encode<M: Message>(message: &M) -> Vec<u8> {
    message.encode_to_vec()
}
