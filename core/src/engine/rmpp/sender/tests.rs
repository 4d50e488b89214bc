use core::time::Duration;

use super::super::tests::{
    at, cfg, drain_sender, hdr_of, message, reply, rmpp_of, sender, DM, NONE, SA, VENDOR,
};
use super::*;

/// (flags, seg, paylen) of each DATA segment.
fn headers(segs: &[[u8; MAD_SIZE]]) -> Vec<(u8, u32, u32)> {
    segs.iter()
        .map(|s| {
            let p = Packet::new_unchecked(&s[..]);
            assert_eq!((p.rmpp_version(), p.rmpp_type()), (1, RmppType::Data));
            assert_eq!(p.rmpp_status(), RmppStatus::Success);
            (p.flags(), p.seg_num(), p.paylen_newwin())
        })
        .collect()
}

/// Send a whole message with a window wide open; every segment.
fn all_segments(class: u8, data_len: usize) -> Vec<[u8; MAD_SIZE]> {
    let mut tx = sender(class, data_len, u32::MAX, 0);
    drain_sender(&mut tx, at(0))
}

#[test]
fn segment_sizes_and_payload_length() {
    // (class, data bytes per segment)
    for (class, per) in [(SA, 200), (VENDOR, 216), (DM, 192), (NONE, 220)] {
        let hdr = hdr_of(class);
        assert_eq!(MAD_SIZE - hdr, per);
        for segs in [1usize, 2, 63, 64, 65] {
            for (data_len, pad) in [
                (segs * per, 0),
                (segs * per - 13, 13),
                ((segs - 1) * per + 1, per - 1),
            ] {
                let got = all_segments(class, data_len);
                assert_eq!(got.len(), segs, "class {class:#x} len {data_len}");
                let h = headers(&got);
                let first_len = (segs * 220 - pad) as u32;
                let last_len = (220 - pad) as u32;
                for (i, &(flags, seg, paylen)) in h.iter().enumerate() {
                    let n = i + 1;
                    assert_eq!(seg as usize, n);
                    let mut want_flags = rmpp::FLAG_ACTIVE;
                    let mut want_len = 0;
                    if n == 1 {
                        want_flags |= rmpp::FLAG_FIRST;
                        want_len = first_len;
                    }
                    if n == segs {
                        want_flags |= rmpp::FLAG_LAST;
                        want_len = last_len;
                    }
                    assert_eq!((flags, paylen), (want_flags, want_len), "seg {n} of {segs}");
                }
                // The data, re-read from the segments, is the message's.
                let msg = message(class, hdr, data_len);
                let mut data: Vec<u8> = got.iter().flat_map(|s| s[hdr..].to_vec()).collect();
                assert!(data[data_len..].iter().all(|&b| b == 0), "pad is zero");
                data.truncate(data_len);
                assert_eq!(&data[..], &msg[hdr..]);
                for s in &got {
                    assert_eq!(&s[..24], &msg[..24], "MAD header repeated");
                    assert_eq!(&s[36..hdr], &msg[36..hdr], "class header repeated");
                }
            }
        }
    }
}

#[test]
fn no_class_header_segments_carry_220_bytes() {
    let hdr = rmpp::END;
    let msg = message(NONE, hdr, 220 * 3);
    let mut tx = Sender::new(at(0), msg, hdr, 10, Duration::from_secs(2), 0, &cfg()).unwrap();
    let segs = drain_sender(&mut tx, at(0));
    assert_eq!(
        headers(&segs).iter().map(|h| h.2).collect::<Vec<_>>(),
        [660, 0, 220]
    );
}

#[test]
fn empty_message_is_one_segment_padded_whole() {
    let h = headers(&all_segments(SA, 0));
    let both = rmpp::FLAG_ACTIVE | rmpp::FLAG_FIRST | rmpp::FLAG_LAST;
    assert_eq!(h, [(both, 1, 20)], "220 - 200 bytes of pad");
}

#[test]
fn resp_time_from_the_user_header_or_none() {
    let seg = all_segments(SA, 10)[0];
    assert_eq!(
        Packet::new_unchecked(&seg[..]).resp_time(),
        rmpp::RESP_TIME_NONE
    );
    let hdr = hdr_of(SA);
    let mut msg = message(SA, hdr, 10);
    msg[26] = (5 << 3) | rmpp::FLAG_ACTIVE;
    let mut tx = Sender::new(at(0), msg, hdr, 1, Duration::from_secs(2), 0, &cfg()).unwrap();
    let seg = drain_sender(&mut tx, at(0))[0];
    assert_eq!(Packet::new_unchecked(&seg[..]).resp_time(), 5);
}

#[test]
fn new_rejects_short_and_oversized_messages() {
    let c = RmppConfig {
        max_message: 1000,
        ..cfg()
    };
    let d = Duration::from_secs(2);
    let short = Sender::new(at(0), vec![0; 50], 56, 1, d, 0, &c).unwrap_err();
    assert!(matches!(short, Error::InvalidArgument(_)));
    let big = Sender::new(at(0), vec![0; 1001], 56, 1, d, 0, &c).unwrap_err();
    assert!(matches!(
        big,
        Error::MessageTooLarge {
            len: 1001,
            limit: 1000
        }
    ));
    let bad_hdr = Sender::new(at(0), vec![0; 100], 24, 1, d, 0, &c).unwrap_err();
    assert!(matches!(bad_hdr, Error::InvalidArgument(_)));
    assert!(Sender::new(at(0), vec![0; 1000], 56, 1, d, 0, &c).is_ok());
}

#[test]
fn window_advance() {
    let mut tx = sender(SA, 200 * 200, 1, 0);
    assert_eq!(tx.seg_count(), 200);
    let first = drain_sender(&mut tx, at(0));
    assert_eq!(first.len(), 1, "the first window is window_last = 1");
    let p = tx.handle_rmpp(at(1), &reply(&first[0], RmppType::Ack, 0, 1, 65));
    assert_eq!(p, Progress::Pending);
    let w = drain_sender(&mut tx, at(1));
    assert_eq!(
        headers(&w).iter().map(|h| h.1).collect::<Vec<_>>(),
        (2..=65).collect::<Vec<_>>()
    );
    tx.handle_rmpp(at(2), &reply(&w[0], RmppType::Ack, 0, 65, 129));
    assert_eq!(headers(&drain_sender(&mut tx, at(2)))[..1], [(1, 66, 0)]);
    // An ACK opening past the end only sends what exists.
    tx.handle_rmpp(at(3), &reply(&w[0], RmppType::Ack, 0, 129, 1000));
    let rest = drain_sender(&mut tx, at(3));
    assert_eq!(headers(&rest).last().unwrap().1, 200);
    let done = tx.handle_rmpp(at(4), &reply(&w[0], RmppType::Ack, 0, 200, 1000));
    assert_eq!(done, Progress::Complete);
    assert_eq!(tx.deadline(), None);
}

#[test]
fn dual_sided_initial_window_sends_at_once() {
    let mut tx = sender(SA, 200 * 10, 4, 0);
    assert_eq!(drain_sender(&mut tx, at(0)).len(), 4);
}

#[test]
fn ack_timeout_resends_from_last_ack() {
    let mut tx = sender(SA, 200 * 100, 1, 3);
    let s1 = drain_sender(&mut tx, at(0));
    tx.handle_rmpp(at(1), &reply(&s1[0], RmppType::Ack, 0, 1, 65));
    assert_eq!(drain_sender(&mut tx, at(1)).len(), 64);
    tx.handle_rmpp(at(2), &reply(&s1[0], RmppType::Ack, 0, 10, 65));
    assert!(
        drain_sender(&mut tx, at(2)).is_empty(),
        "an ACK alone resends nothing"
    );
    assert_eq!(tx.deadline(), Some(at(2001)), "armed by the last send");
    assert_eq!(tx.handle_timeout(at(2000)), Progress::Pending);
    assert!(drain_sender(&mut tx, at(2000)).is_empty(), "early: nothing");
    assert_eq!(tx.handle_timeout(at(2001)), Progress::Pending);
    let again = drain_sender(&mut tx, at(2001));
    assert_eq!(
        headers(&again).iter().map(|h| h.1).collect::<Vec<_>>(),
        (11..=65).collect::<Vec<_>>()
    );
    assert_eq!(tx.deadline(), Some(at(4001)));
}

#[test]
fn retries_exhausted_fail_without_abort() {
    let mut tx = sender(SA, 500, 1, 2);
    drain_sender(&mut tx, at(0));
    for _ in 0..2 {
        let now = tx.deadline().unwrap();
        assert_eq!(tx.handle_timeout(now), Progress::Pending);
        assert_eq!(headers(&drain_sender(&mut tx, now))[0].1, 1);
    }
    let now = tx.deadline().unwrap();
    let p = tx.handle_timeout(now);
    assert_eq!(
        p,
        Progress::Failed {
            status: RmppStatus::TooManyRetries,
            notify_peer: false
        }
    );
    assert!(
        drain_sender(&mut tx, now).is_empty(),
        "the kernel sends no ABORT"
    );
    assert_eq!(tx.deadline(), None);
}

#[test]
fn retries_reset_per_window() {
    let mut tx = sender(SA, 200 * 200, 1, 1);
    let s1 = drain_sender(&mut tx, at(0));
    assert_eq!(
        tx.handle_timeout(at(2000)),
        Progress::Pending,
        "retry 1 of 1"
    );
    drain_sender(&mut tx, at(2000));
    // Progress: the next window gets its own retries.
    tx.handle_rmpp(at(2100), &reply(&s1[0], RmppType::Ack, 0, 1, 65));
    drain_sender(&mut tx, at(2100));
    assert_eq!(
        tx.handle_timeout(at(4100)),
        Progress::Pending,
        "reset by the ACK"
    );
    drain_sender(&mut tx, at(4100));
    // A repeated ACK of the same segment is no progress.
    tx.handle_rmpp(at(4200), &reply(&s1[0], RmppType::Ack, 0, 1, 65));
    assert!(matches!(
        tx.handle_timeout(at(6100)),
        Progress::Failed { .. }
    ));
}

#[test]
fn old_ack_is_ignored() {
    let mut tx = sender(SA, 200 * 200, 1, 0);
    let s1 = drain_sender(&mut tx, at(0));
    tx.handle_rmpp(at(1), &reply(&s1[0], RmppType::Ack, 0, 1, 65));
    drain_sender(&mut tx, at(1));
    tx.handle_rmpp(at(2), &reply(&s1[0], RmppType::Ack, 0, 30, 65));
    // A late ACK of an earlier segment, or of a smaller window, changes nothing.
    assert_eq!(
        tx.handle_rmpp(at(3), &reply(&s1[0], RmppType::Ack, 0, 20, 65)),
        Progress::Pending
    );
    assert_eq!(
        tx.handle_rmpp(at(3), &reply(&s1[0], RmppType::Ack, 0, 30, 40)),
        Progress::Pending
    );
    assert_eq!(tx.last_ack(), 30);
    assert!(drain_sender(&mut tx, at(3)).is_empty());
}

/// Feed `mad` to a fresh 3-segment sender (window 1, seg 1 sent); expect an ABORT with `status`.
fn expect_abort(mad_of: impl Fn(&[u8]) -> [u8; MAD_SIZE], status: RmppStatus) {
    let mut tx = sender(SA, 600, 1, 0);
    let s1 = drain_sender(&mut tx, at(0));
    let bad = mad_of(&s1[0]);
    assert_eq!(
        tx.handle_rmpp(at(1), &bad),
        Progress::Failed {
            status,
            notify_peer: true
        }
    );
    let out = drain_sender(&mut tx, at(1));
    assert_eq!(out.len(), 1, "exactly the ABORT");
    assert_eq!(rmpp_of(&out[0]), (RmppType::Abort, status, 0, 0));
    assert_eq!(out[0][24], 1, "version 1");
    assert_eq!(out[0][26] & 7, rmpp::FLAG_ACTIVE);
    assert_eq!(
        out[0][3],
        bad[3] ^ 0x80,
        "method flipped from the offending MAD"
    );
    assert_eq!(&out[0][36..56], &s1[0][36..56], "class header copied");
    assert!(out[0][56..].iter().all(|&b| b == 0));
    assert_eq!(tx.deadline(), None);
    assert!(matches!(
        tx.handle_timeout(at(99_999)),
        Progress::Failed {
            notify_peer: false,
            ..
        }
    ));
}

#[test]
fn abort_w2s_when_new_window_below_segment() {
    expect_abort(
        |s| reply(s, RmppType::Ack, 0, 1, 0),
        RmppStatus::WindowTooSmall,
    );
}

#[test]
fn abort_s2b_when_ack_beyond_window_or_end() {
    expect_abort(
        |s| reply(s, RmppType::Ack, 0, 2, 3),
        RmppStatus::SegmentTooBig,
    );
    let mut tx = sender(SA, 600, 10, 0);
    let s = drain_sender(&mut tx, at(0));
    let p = tx.handle_rmpp(at(1), &reply(&s[0], RmppType::Ack, 0, 4, 10));
    assert!(matches!(
        p,
        Progress::Failed {
            status: RmppStatus::SegmentTooBig,
            ..
        }
    ));
}

#[test]
fn abort_badt_on_unknown_type() {
    expect_abort(
        |s| reply(s, RmppType::Unknown(7), 0, 1, 1),
        RmppStatus::BadType,
    );
}

#[test]
fn abort_unv_on_bad_version() {
    expect_abort(
        |s| {
            let mut m = reply(s, RmppType::Ack, 0, 1, 2);
            m[24] = 2;
            m
        },
        RmppStatus::UnsupportedVersion,
    );
}

#[test]
fn abort_bad_status_on_ack_with_status_or_odd_stop_abort() {
    expect_abort(|s| reply(s, RmppType::Ack, 1, 1, 2), RmppStatus::BadStatus);
    expect_abort(|s| reply(s, RmppType::Stop, 0, 0, 0), RmppStatus::BadStatus);
    expect_abort(
        |s| reply(s, RmppType::Abort, 117, 0, 0),
        RmppStatus::BadStatus,
    );
}

#[test]
fn stop_from_receiver_fails_without_reply() {
    let mut tx = sender(SA, 600, 1, 0);
    let s1 = drain_sender(&mut tx, at(0));
    let p = tx.handle_rmpp(at(1), &reply(&s1[0], RmppType::Stop, 1, 0, 0));
    assert_eq!(
        p,
        Progress::Failed {
            status: RmppStatus::ResourcesExhausted,
            notify_peer: false
        }
    );
    assert!(drain_sender(&mut tx, at(1)).is_empty());
}

#[test]
fn abort_from_receiver_fails_with_its_status() {
    let mut tx = sender(SA, 600, 1, 0);
    let s1 = drain_sender(&mut tx, at(0));
    let p = tx.handle_rmpp(at(1), &reply(&s1[0], RmppType::Abort, 118, 0, 0));
    assert_eq!(
        p,
        Progress::Failed {
            status: RmppStatus::TotalTimeTooLong,
            notify_peer: false
        }
    );
    assert!(drain_sender(&mut tx, at(1)).is_empty());
    // After the end, inputs change nothing.
    let again = tx.handle_rmpp(at(2), &reply(&s1[0], RmppType::Ack, 0, 3, 3));
    assert!(matches!(
        again,
        Progress::Failed {
            status: RmppStatus::TotalTimeTooLong,
            ..
        }
    ));
}

#[test]
fn final_ack_completes_and_later_inputs_are_ignored() {
    let mut tx = sender(SA, 100, 1, 0);
    let s1 = drain_sender(&mut tx, at(0));
    assert_eq!(
        tx.handle_rmpp(at(1), &reply(&s1[0], RmppType::Ack, 0, 1, 1)),
        Progress::Complete
    );
    assert_eq!(
        tx.handle_rmpp(at(2), &reply(&s1[0], RmppType::Abort, 118, 0, 0)),
        Progress::Complete
    );
    assert_eq!(tx.handle_timeout(at(10_000)), Progress::Complete);
    assert!(drain_sender(&mut tx, at(10_000)).is_empty());
}

/// The three segments of 600 bytes of SA data, RMPP headers byte for byte
/// as the kernel's `send_next_seg` writes them (RRespTime none).
#[test]
fn segment_rmpp_headers_match_kernel_bytes() {
    let segs = all_segments(SA, 590);
    let want: [[u8; 12]; 3] = [
        [1, 1, 0xfb, 0, 0, 0, 0, 1, 0, 0, 0x02, 0x8a], // Active|First, 660 - 10 pad
        [1, 1, 0xf9, 0, 0, 0, 0, 2, 0, 0, 0, 0],       // Active, middle: 0
        [1, 1, 0xfd, 0, 0, 0, 0, 3, 0, 0, 0, 0xd2],    // Active|Last, 220 - 10
    ];
    for (s, w) in segs.iter().zip(want) {
        assert_eq!(s[24..36], w);
    }
    assert!(segs[2][56 + 190..].iter().all(|&b| b == 0), "pad zeroed");
}
