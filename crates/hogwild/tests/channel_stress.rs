//! The bounded channel under load: many producers and consumers, limits never exceeded, close
//! while threads are blocked on both sides.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hogwild::channel::{ByteSize, Channel, Got, TryPutError};

#[derive(Debug, PartialEq)]
struct Item {
    id: usize,
    bytes: usize,
}

impl ByteSize for Item {
    fn byte_size(&self) -> usize {
        self.bytes
    }
}

/// An item whose size varies with its id (1..=700 bytes).
fn item(id: usize) -> Item {
    Item {
        id,
        bytes: 1 + (id * 7919) % 700,
    }
}

#[test]
fn many_producers_and_consumers_deliver_everything_within_limits() {
    const PRODUCERS: usize = 6;
    const CONSUMERS: usize = 5;
    const PER_PRODUCER: usize = 5000;
    const CAPACITY: usize = 8;
    const BYTE_LIMIT: usize = 1500;
    let channel = Arc::new(Channel::new(CAPACITY, BYTE_LIMIT));
    let max_len = AtomicUsize::new(0);
    let received: Vec<Vec<usize>> = std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let channel = &channel;
            s.spawn(move || {
                for i in 0..PER_PRODUCER {
                    channel.put(item(p * PER_PRODUCER + i)).unwrap();
                }
            });
        }
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                let (channel, max_len) = (&channel, &max_len);
                s.spawn(move || {
                    let mut ids = Vec::new();
                    while ids.len() < PRODUCERS * PER_PRODUCER / CONSUMERS {
                        max_len.fetch_max(channel.len(), Ordering::Relaxed);
                        ids.push(channel.get().unwrap().id);
                    }
                    ids
                })
            })
            .collect();
        consumers.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let mut all: Vec<usize> = received.concat();
    all.sort_unstable();
    assert_eq!(all, (0..PRODUCERS * PER_PRODUCER).collect::<Vec<_>>());
    assert!(
        channel.peak_bytes() <= BYTE_LIMIT,
        "{}",
        channel.peak_bytes()
    );
    assert!(
        channel.peak_bytes() > BYTE_LIMIT / 2,
        "the limit was reached"
    );
    assert!(max_len.load(Ordering::Relaxed) <= CAPACITY);
    assert_eq!((channel.len(), channel.bytes()), (0, 0));
}

#[test]
fn per_producer_order_is_kept() {
    let channel = Arc::new(Channel::new(3, 1 << 20));
    let got: Vec<usize> = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..10_000 {
                channel.put(item(i)).unwrap();
            }
            channel.close();
        });
        std::iter::from_fn(|| channel.get().map(|i| i.id)).collect()
    });
    assert_eq!(got, (0..10_000).collect::<Vec<_>>());
}

#[test]
fn byte_limit_blocks_before_count_limit() {
    let channel = Channel::new(100, 1000);
    channel.put(Item { id: 0, bytes: 600 }).unwrap();
    assert_eq!(
        channel.try_put(Item { id: 1, bytes: 600 }),
        Err(TryPutError::Full(Item { id: 1, bytes: 600 }))
    );
    channel.put(Item { id: 2, bytes: 400 }).unwrap();
    assert_eq!((channel.len(), channel.bytes()), (2, 1000));
}

#[test]
fn count_limit_blocks_before_byte_limit() {
    let channel = Channel::new(2, 1 << 20);
    channel.put(item(0)).unwrap();
    channel.put(item(1)).unwrap();
    assert!(matches!(
        channel.try_put(item(2)),
        Err(TryPutError::Full(_))
    ));
}

#[test]
fn an_element_larger_than_the_limit_passes_when_empty() {
    let channel = Arc::new(Channel::new(4, 100));
    channel.put(Item { id: 0, bytes: 10 }).unwrap();
    std::thread::scope(|s| {
        let writer = s.spawn(|| channel.put(Item { id: 1, bytes: 1000 }));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            channel.len(),
            1,
            "the big element waits for an empty channel"
        );
        assert_eq!(channel.get().unwrap().id, 0);
        writer.join().unwrap().unwrap();
    });
    assert_eq!(channel.get().unwrap().id, 1);
    assert_eq!(channel.peak_bytes(), 1000);
}

#[test]
fn close_wakes_blocked_writers_and_readers() {
    let full = Arc::new(Channel::new(1, 1 << 20));
    full.put(item(0)).unwrap();
    let empty: Arc<Channel<Item>> = Arc::new(Channel::new(1, 1 << 20));
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..4)
            .map(|i| {
                s.spawn({
                    let full = &full;
                    move || full.put(item(100 + i))
                })
            })
            .collect();
        let readers: Vec<_> = (0..4).map(|_| s.spawn(|| empty.get())).collect();
        std::thread::sleep(Duration::from_millis(50));
        full.close();
        empty.close();
        for w in writers {
            let err = w.join().unwrap().unwrap_err();
            assert!(err.0.id >= 100, "the element comes back");
        }
        for r in readers {
            assert!(r.join().unwrap().is_none());
        }
    });
    // Readers drain what was put before the close, then see the end.
    assert_eq!(full.get().map(|i| i.id), Some(0));
    assert!(full.get().is_none());
    assert!(matches!(full.try_put(item(9)), Err(TryPutError::Closed(_))));
    assert_eq!(
        full.put(item(9)).unwrap_err().to_string(),
        "put on a closed channel"
    );
}

#[test]
fn close_during_heavy_traffic_loses_nothing_accepted() {
    for round in 0..20 {
        let channel = Arc::new(Channel::new(4, 2000));
        let accepted = AtomicUsize::new(0);
        let taken = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for p in 0..4 {
                let (channel, accepted) = (&channel, &accepted);
                s.spawn(move || {
                    for i in 0.. {
                        if channel.put(item(p * 1_000_000 + i)).is_err() {
                            break;
                        }
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            for _ in 0..3 {
                let (channel, taken) = (&channel, &taken);
                s.spawn(move || {
                    while channel.get().is_some() {
                        taken.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(1 + round % 5));
            channel.close();
        });
        assert_eq!(
            accepted.load(Ordering::Relaxed),
            taken.load(Ordering::Relaxed),
            "round {round}"
        );
        assert!(channel.peak_bytes() <= 2000);
    }
}

#[test]
fn bounded_gets_tell_empty_from_ended() {
    let channel = Arc::new(Channel::new(2, 1 << 20));
    assert_eq!(channel.try_get(), Got::Empty);
    let t0 = std::time::Instant::now();
    assert_eq!(channel.get_timeout(Duration::from_millis(20)), Got::Empty);
    assert!(
        t0.elapsed() >= Duration::from_millis(20),
        "waited the timeout"
    );
    channel.put(item(1)).unwrap();
    channel.put(item(2)).unwrap();
    // Taking makes room for a blocked writer, as `get` does.
    std::thread::scope(|s| {
        let writer = s.spawn(|| channel.put(item(3)));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(channel.try_get(), Got::Item(item(1)));
        writer.join().unwrap().unwrap();
    });
    // An element put while a reader waits is taken before the timeout.
    let got = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            (0..3)
                .map(|_| channel.get_timeout(Duration::from_secs(30)))
                .collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_millis(20));
        channel.put(item(4)).unwrap();
        reader.join().unwrap()
    });
    assert_eq!(
        got,
        [Got::Item(item(2)), Got::Item(item(3)), Got::Item(item(4))]
    );
    channel.put(item(5)).unwrap();
    channel.close();
    // Drained first, then the end, however the reader asks.
    assert_eq!(
        channel.get_timeout(Duration::from_secs(30)),
        Got::Item(item(5))
    );
    assert_eq!(channel.try_get(), Got::Closed);
    assert_eq!(channel.get_timeout(Duration::from_secs(30)), Got::Closed);
    assert_eq!(channel.bytes(), 0);
}

#[test]
fn close_wakes_a_reader_waiting_with_a_timeout() {
    let channel: Arc<Channel<Item>> = Arc::new(Channel::new(1, 1 << 20));
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let t0 = std::time::Instant::now();
            (channel.get_timeout(Duration::from_secs(60)), t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(20));
        channel.close();
        let (got, waited) = reader.join().unwrap();
        assert_eq!(got, Got::Closed);
        assert!(
            waited < Duration::from_secs(30),
            "woken by the close, not the timeout"
        );
    });
}
