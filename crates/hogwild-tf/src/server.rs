//! An in-process TensorFlow server: the runner's own task of a cluster, served over gRPC.
//!
//! The `tensorflow` crate wraps sessions but not servers, so this module calls the C API's
//! `TF_NewServer` / `TF_ServerStart` / `TF_ServerTarget` (c_api_experimental.h, exported by the
//! wheel's `libtensorflow_cc.so.2`) through `tensorflow-sys`. A session whose target is the
//! server's own `grpc://localhost:<port>` finds it in TensorFlow's registry of in-process masters
//! and talks to it without RPCs, as `tf.compat.v1.Session(server.target)` does in Python.

use std::ffi::CStr;
use std::ptr::NonNull;

use prost::Message;
use tensorflow_sys as tf;

use crate::proto::ServerDef;
use crate::{Error, Result};

/// A started server. It is never stopped: TensorFlow cannot shut a started gRPC server down
/// (`TF_ServerStop` answers Unimplemented and `TF_DeleteServer` would then abort the process),
/// so, as Python's `tf.distribute.Server` does, the server is left to the end of the process.
#[derive(Debug)]
pub(crate) struct Server {
    target: String,
    // Kept, never freed (see above); a raw pointer makes the type neither Send nor Sync, which
    // nothing needs.
    _server: NonNull<tf::TF_Server>,
}

/// An owned `TF_Status`.
struct StatusBox(NonNull<tf::TF_Status>);

impl StatusBox {
    fn new() -> Self {
        // SAFETY: TF_NewStatus has no preconditions and returns a fresh, non-null status.
        let raw = unsafe { tf::TF_NewStatus() };
        StatusBox(NonNull::new(raw).expect("TF_NewStatus returned null"))
    }

    fn as_ptr(&self) -> *mut tf::TF_Status {
        self.0.as_ptr()
    }

    /// `Err(message)` unless the status is OK.
    fn check(&self) -> std::result::Result<(), String> {
        // SAFETY: the status is live (owned by `self`).
        let code = unsafe { tf::TF_GetCode(self.as_ptr()) };
        if code == tf::TF_Code::TF_OK {
            return Ok(());
        }
        // SAFETY: the status is live; TF_Message returns a NUL-terminated string owned by it,
        // copied here before the status can change.
        let message = unsafe { CStr::from_ptr(tf::TF_Message(self.as_ptr())) };
        Err(format!("{code:?}: {}", message.to_string_lossy()))
    }
}

impl Drop for StatusBox {
    fn drop(&mut self) {
        // SAFETY: the status was made by TF_NewStatus and is deleted once, here.
        unsafe { tf::TF_DeleteStatus(self.as_ptr()) }
    }
}

impl Server {
    /// Creates and starts the server of `def`'s task (`job_name`, `task_index`), listening on the
    /// port of that task's address in `def.cluster`.
    pub(crate) fn start(def: &ServerDef) -> Result<Server> {
        let task = format!("/job:{}/task:{}", def.job_name, def.task_index);
        let fail = |message: String| Error::Server {
            task: task.clone(),
            message,
        };
        let bytes = def.encode_to_vec();
        let status = StatusBox::new();
        // SAFETY: `bytes` is a live buffer of `bytes.len()` bytes, read during the call only;
        // `status` is live. The result is null or a server the caller owns.
        let raw = unsafe { tf::TF_NewServer(bytes.as_ptr().cast(), bytes.len(), status.as_ptr()) };
        status.check().map_err(&fail)?;
        let server = NonNull::new(raw).ok_or_else(|| fail("TF_NewServer returned null".into()))?;
        // SAFETY: `server` is a live server from TF_NewServer, `status` is live.
        unsafe { tf::TF_ServerStart(server.as_ptr(), status.as_ptr()) };
        status.check().map_err(&fail)?;
        // SAFETY: `server` is live; TF_ServerTarget returns a NUL-terminated string owned by the
        // server, copied here.
        let target = unsafe { CStr::from_ptr(tf::TF_ServerTarget(server.as_ptr())) };
        Ok(Server {
            target: target.to_string_lossy().into_owned(),
            _server: server,
        })
    }

    /// The target a session connects to (`grpc://localhost:<port>`).
    pub(crate) fn target(&self) -> &str {
        &self.target
    }
}
