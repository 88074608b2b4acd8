//! The protobuf codec of the generated service and client: tonic-prost's, except that bytes
//! which do not decode as the expected message are the sender's fault (INVALID_ARGUMENT), not
//! a server bug (tonic-prost says INTERNAL, which alerts and retry policies read as ours), and
//! that a request is bounded on its bytes before it is decoded (`grpc::entries`).

use prost::{Message, Name, bytes::Buf};
use tonic::{
    Code, Status,
    codec::{BufferSettings, Codec, DecodeBuf, Decoder},
};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// [`ProstCodec`] with decode errors as INVALID_ARGUMENT (`codec_path` in build.rs).
#[derive(Debug, Clone)]
pub struct StrictCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for StrictCodec<T, U> {
    fn default() -> Self {
        Self(ProstCodec::default())
    }
}

impl<T, U> Codec for StrictCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Name + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = StrictDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        StrictDecoder(self.0.decoder())
    }
}

/// [`ProstDecoder`] whose errors name the malformed input.
#[derive(Debug)]
pub struct StrictDecoder<U>(ProstDecoder<U>);

impl<U: Message + Name + Default> Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        // Bounded before it is decoded (see `grpc::entries`); the buffer is one piece.
        if let Some(descriptor) = super::descriptors::pool().get_message_by_name(&U::full_name())
            && let Err(too_many) = super::entries::check_protobuf(&descriptor, buf.chunk())
        {
            return Err(too_many.status());
        }
        self.0.decode(buf).map_err(|status| match status.code() {
            Code::Internal => Status::invalid_argument(format!(
                "the message is not valid protobuf for this method: {}",
                status.message()
            )),
            _ => status,
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
