//! Where opened and closed incidents go (the alert webhook, a test's
//! channel): an [`IncidentSink`] runs on a thread of its own behind a
//! bounded queue, so a slow or stuck receiver never holds up the analysis,
//! and through it never ingest; when the queue is full the alert is
//! dropped and counted. An instance that waits while another runs the
//! analysis hands it the store's open incidents instead, each tick, so
//! its gauges say what the running instance's say.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

use wire::alert::IncidentAlert;

/// Receives incident events, in the order they happened.
pub trait IncidentSink: Send {
    /// Delivers one event (may take its time: it has its own thread).
    fn deliver(&mut self, alert: IncidentAlert);

    /// The incidents open now, as another instance's analysis stored them
    /// (events of theirs this instance does not deliver).
    fn open_now(&mut self, _open: Vec<IncidentAlert>) {}
}

/// What the queue carries to the sink's thread.
#[derive(Debug)]
enum Item {
    Event(IncidentAlert),
    OpenNow(Vec<IncidentAlert>),
}

/// A sink that hands each alert to a channel (tests, or a deliverer that
/// runs its own loop).
impl IncidentSink for std::sync::mpsc::Sender<IncidentAlert> {
    fn deliver(&mut self, alert: IncidentAlert) {
        // A receiver gone is no reason to stop the analysis.
        let _ = self.send(alert);
    }
}

/// The queue in front of a sink's thread.
#[derive(Debug, Clone)]
pub struct SinkQueue {
    tx: SyncSender<Item>,
    dropped: Arc<AtomicU64>,
}

impl SinkQueue {
    /// Starts `sink` on a thread of its own behind a queue of `capacity`
    /// alerts (at least 1).
    pub fn start(mut sink: Box<dyn IncidentSink>, capacity: usize) -> std::io::Result<SinkQueue> {
        let (tx, rx) = sync_channel::<Item>(capacity.max(1));
        std::thread::Builder::new()
            .name("incident-sink".into())
            .spawn(move || {
                for item in rx {
                    match item {
                        Item::Event(alert) => sink.deliver(alert),
                        Item::OpenNow(open) => sink.open_now(open),
                    }
                }
            })?;
        Ok(SinkQueue {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Queues `alert` without waiting; false (and counted) when the queue
    /// is full or the sink's thread is gone.
    pub fn offer(&self, alert: IncidentAlert) -> bool {
        match self.tx.try_send(Item::Event(alert)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Hands the incidents open now without waiting; a full queue skips
    /// it (the next tick hands a newer set), so nothing is counted.
    pub fn offer_open(&self, open: Vec<IncidentAlert>) {
        let _ = self.tx.try_send(Item::OpenNow(open));
    }

    /// Alerts dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
