//! The bounded FIFO between the callers of [`super::Alerts::incident`] and
//! one webhook's sending thread: a push never waits (it only takes a lock
//! the sending thread holds for a pop, never across I/O), and when the
//! queue is full the oldest waiting event makes room for the new one, so
//! what a long outage leaves is the newest state. The event being sent is
//! no longer in the queue (its thread owns it), so order holds: everything
//! queued is younger than it.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a push did.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed<T> {
    /// Queued; nothing lost.
    Queued,
    /// Queued; the oldest waiting event was dropped to make room.
    Displaced(T),
    /// The queue is closed (its thread is gone): not queued.
    Closed(T),
}

#[derive(Debug)]
struct State<T> {
    items: VecDeque<T>,
    closed: bool,
    /// Events dropped for room that the sending thread has not yet logged
    /// (the caller must not write to stderr: it could block).
    unlogged_drops: u64,
}

/// A bounded FIFO with drop-oldest overflow, a close flag, and waits that
/// end when it is closed.
#[derive(Debug)]
pub struct Queue<T> {
    capacity: usize,
    state: Mutex<State<T>>,
    changed: Condvar,
}

impl<T> Queue<T> {
    /// An empty queue of at most `capacity` (at least 1) waiting events.
    pub fn new(capacity: usize) -> Queue<T> {
        Queue {
            capacity: capacity.max(1),
            state: Mutex::new(State {
                items: VecDeque::new(),
                closed: false,
                unlogged_drops: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while holding the lock left the queue consistent (every
        // critical section is a single VecDeque operation): keep going.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends `item`; when full, drops the oldest waiting event first.
    pub fn push(&self, item: T) -> Pushed<T> {
        let mut state = self.lock();
        if state.closed {
            return Pushed::Closed(item);
        }
        let displaced = if state.items.len() >= self.capacity {
            state.unlogged_drops += 1;
            state.items.pop_front()
        } else {
            None
        };
        state.items.push_back(item);
        drop(state);
        self.changed.notify_all();
        match displaced {
            Some(old) => Pushed::Displaced(old),
            None => Pushed::Queued,
        }
    }

    /// The oldest event, waiting for one; `None` once closed.
    pub fn pop_wait(&self) -> Option<T> {
        let mut state = self.lock();
        loop {
            if state.closed {
                return None;
            }
            if let Some(item) = state.items.pop_front() {
                return Some(item);
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Waits `delay` (a back-off); `false` if the queue was closed meanwhile.
    pub fn sleep(&self, delay: Duration) -> bool {
        let until = Instant::now() + delay;
        let mut state = self.lock();
        loop {
            if state.closed {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            state = self
                .changed
                .wait_timeout(state, until - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    /// Events dropped for room since the last call (for the log).
    pub fn take_unlogged_drops(&self) -> u64 {
        std::mem::take(&mut self.lock().unlogged_drops)
    }

    /// Events waiting (not counting the one being sent).
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// The most events that wait.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Stops the queue: waits end, pushes are refused.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_full_queue_drops_its_oldest_and_keeps_the_order_of_the_rest() {
        let q = Queue::new(3);
        for i in 1..=3 {
            assert_eq!(q.push(i), Pushed::Queued);
        }
        assert_eq!(q.push(4), Pushed::Displaced(1));
        assert_eq!(q.push(5), Pushed::Displaced(2));
        assert_eq!(q.take_unlogged_drops(), 2);
        assert_eq!(q.take_unlogged_drops(), 0);
        let popped: Vec<_> = (0..3).map(|_| q.pop_wait().unwrap()).collect();
        assert_eq!(popped, [3, 4, 5]);
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn closing_ends_a_wait_and_refuses_pushes() {
        let q = Arc::new(Queue::<u32>::new(2));
        let waiter = {
            let q = Arc::clone(&q);
            std::thread::spawn(move || q.pop_wait())
        };
        q.close();
        assert_eq!(waiter.join().unwrap(), None);
        assert_eq!(q.push(1), Pushed::Closed(1));
        assert!(!q.sleep(Duration::from_secs(3600)));
    }
}
