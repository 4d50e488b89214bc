use super::super::tests::{
    at, cfg, drain_receiver, drain_sender, hdr_of, message, reply, rmpp_of, sender, DM, SA, VENDOR,
};
use super::*;

/// All DATA segments of an SA message of `data_len` bytes.
fn segments(class: u8, data_len: usize) -> Vec<[u8; MAD_SIZE]> {
    drain_sender(&mut sender(class, data_len, u32::MAX, 0), at(0))
}

fn failed(status: RmppStatus, notify_peer: bool) -> Progress {
    Progress::Failed {
        status,
        notify_peer,
    }
}

/// Set PayloadLength of a segment.
fn with_paylen(mut m: [u8; MAD_SIZE], v: u32) -> [u8; MAD_SIZE] {
    Packet::new_unchecked(&mut m[..]).set_paylen_newwin(v);
    m
}

/// Check `out` is the one ABORT (or STOP) with `status` answering `src`.
fn assert_nack(out: &[[u8; MAD_SIZE]], src: &[u8], t: RmppType, status: RmppStatus) {
    assert_eq!(out.len(), 1);
    assert_eq!(rmpp_of(&out[0]), (t, status, 0, 0));
    assert_eq!(out[0][3], src[3] ^ 0x80);
}

#[test]
fn in_order_reassembly_is_byte_exact() {
    for class in [SA, VENDOR] {
        let hdr = hdr_of(class);
        for data_len in [0, 1, 199, 200, 201, 200 * 64, 200 * 65 + 3, 100_000] {
            let segs = segments(class, data_len);
            let (mut rx, mut p) = Receiver::new(at(0), &segs[0], &cfg());
            for s in &segs[1..] {
                assert_eq!(p, Progress::Pending);
                p = rx.handle_data(at(1), s);
            }
            assert_eq!(p, Progress::Complete);
            let m = rx.take_message().unwrap();
            let want = message(class, hdr, data_len);
            assert_eq!(m.len(), hdr + data_len, "kernel mad_len = hdr + data");
            assert_eq!(&m[..24], &want[..24]);
            assert_eq!(
                &m[24..36],
                &segs[0][24..36],
                "the first segment's RMPP header"
            );
            assert_eq!(&m[36..], &want[36..]);
            assert_eq!(rx.take_message(), None, "once");
        }
    }
}

#[test]
fn acks_half_way_through_each_window_and_on_last() {
    // 130 segments, window 64: the first segment's ACK opens the window, then one ACK
    // every half window moves it on (the kernel's receiver waits for the window's end,
    // and its sender for that ACK), and the last segment gets the final ACK.
    let segs = segments(SA, 200 * 130);
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    let acks = drain_receiver(&mut rx, at(0));
    assert_eq!(
        rmpp_of(&acks[0]),
        (RmppType::Ack, RmppStatus::Success, 1, 65)
    );
    assert_eq!(rx.window_last(), 65);
    let mut next = 1;
    for (ack_at, newwin) in [(33, 97), (65, 129), (97, 161), (129, 193)] {
        for s in &segs[next..ack_at - 1] {
            rx.handle_data(at(1), s);
        }
        assert!(
            drain_receiver(&mut rx, at(1)).is_empty(),
            "no ACK before segment {ack_at}"
        );
        rx.handle_data(at(1), &segs[ack_at - 1]);
        let ack = drain_receiver(&mut rx, at(1));
        assert_eq!(
            rmpp_of(&ack[0]),
            (RmppType::Ack, RmppStatus::Success, ack_at as u32, newwin),
            "the ACK of segment {ack_at}"
        );
        assert_eq!(rx.window_last(), newwin);
        next = ack_at;
    }
    rx.handle_data(at(2), &segs[129]);
    let ack = drain_receiver(&mut rx, at(2));
    assert_eq!(
        rmpp_of(&ack[0]),
        (RmppType::Ack, RmppStatus::Success, 130, 193)
    );
    // The ACK's shape (kernel format_ack): data headers, method flipped, Active only.
    let a = &ack[0];
    assert_eq!(a[3], segs[0][3] ^ 0x80);
    assert_eq!(&a[..3], &segs[0][..3]);
    assert_eq!(&a[4..24], &segs[0][4..24]);
    assert_eq!(&a[36..56], &segs[0][36..56], "class header copied");
    assert_eq!(
        (a[24], a[26]),
        (1, (rmpp::RESP_TIME_NONE << 3) | rmpp::FLAG_ACTIVE)
    );
    assert!(a[56..].iter().all(|&b| b == 0));
}

#[test]
fn duplicate_reack() {
    let segs = segments(SA, 200 * 10);
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    drain_receiver(&mut rx, at(0));
    rx.handle_data(at(1), &segs[1]);
    rx.handle_data(at(1), &segs[2]);
    // Segment 2 was received but not ACKed: its copy is dropped.
    assert_eq!(rx.handle_data(at(2), &segs[1]), Progress::Pending);
    assert!(drain_receiver(&mut rx, at(2)).is_empty());
    // Segment 1 was ACKed: its copy is answered with the current state.
    rx.handle_data(at(3), &segs[0]);
    let ack = drain_receiver(&mut rx, at(3));
    assert_eq!(
        rmpp_of(&ack[0]),
        (RmppType::Ack, RmppStatus::Success, 3, 65)
    );
    // That ACK covered segment 2: now its copy is answered too.
    rx.handle_data(at(4), &segs[1]);
    assert_eq!(drain_receiver(&mut rx, at(4)).len(), 1);
    assert_eq!((rx.stats().reacked, rx.stats().duplicates), (2, 1));
}

#[test]
fn out_of_order_inside_window_is_held() {
    let segs = segments(SA, 200 * 5);
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    for i in [4, 2, 3] {
        assert_eq!(rx.handle_data(at(1), &segs[i]), Progress::Pending);
    }
    assert_eq!(rx.stats().held, 3);
    assert_eq!(rx.handle_data(at(1), &segs[1]), Progress::Complete);
    assert_eq!(
        rx.take_message().unwrap()[56..],
        message(SA, 56, 1000)[56..]
    );
}

#[test]
fn out_of_window_drop() {
    let segs = segments(SA, 200 * 100);
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    drain_receiver(&mut rx, at(0));
    assert_eq!(
        rx.handle_data(at(1), &segs[65]),
        Progress::Pending,
        "segment 66 > 65"
    );
    assert!(drain_receiver(&mut rx, at(1)).is_empty());
    assert_eq!(rx.stats().out_of_window, 1);
    assert_eq!(rx.stats().held, 0);
}

#[test]
fn bad_segment_first_flag_mismatch() {
    let segs = segments(SA, 200 * 3);
    let mut no_first = segs[0];
    no_first[26] &= !rmpp::FLAG_FIRST;
    let (mut rx, p) = Receiver::new(at(0), &no_first, &cfg());
    assert_eq!(p, failed(RmppStatus::BadSegment, true));
    assert_nack(
        &drain_receiver(&mut rx, at(0)),
        &no_first,
        RmppType::Abort,
        RmppStatus::BadSegment,
    );
    assert_eq!(rx.deadline(), None);

    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    drain_receiver(&mut rx, at(0));
    let mut first_flag = segs[1];
    first_flag[26] |= rmpp::FLAG_FIRST;
    assert_eq!(
        rx.handle_data(at(1), &first_flag),
        failed(RmppStatus::BadSegment, true)
    );
    assert_nack(
        &drain_receiver(&mut rx, at(1)),
        &first_flag,
        RmppType::Abort,
        RmppStatus::BadSegment,
    );
}

#[test]
fn stray_middle_segment_starts_nothing_silently() {
    let segs = segments(SA, 200 * 3);
    let (mut rx, p) = Receiver::new(at(0), &segs[1], &cfg());
    assert_eq!(p, failed(RmppStatus::BadSegment, false));
    assert!(drain_receiver(&mut rx, at(0)).is_empty());
    let ack = reply(&segs[0], RmppType::Ack, 0, 1, 1);
    let (_, p) = Receiver::new(at(0), &ack, &cfg());
    assert_eq!(p, failed(RmppStatus::BadType, false));
}

#[test]
fn bad_version_and_status_are_aborted() {
    let segs = segments(SA, 200 * 3);
    let mut v2 = segs[0];
    v2[24] = 2;
    let (mut rx, p) = Receiver::new(at(0), &v2, &cfg());
    assert_eq!(p, failed(RmppStatus::UnsupportedVersion, true));
    assert_nack(
        &drain_receiver(&mut rx, at(0)),
        &v2,
        RmppType::Abort,
        RmppStatus::UnsupportedVersion,
    );
    let mut st = segs[0];
    st[27] = 5;
    let (_, p) = Receiver::new(at(0), &st, &cfg());
    assert_eq!(p, failed(RmppStatus::BadStatus, true));
}

#[test]
fn bad_length_first_claim_beyond_max_message() {
    let segs = segments(SA, 200 * 3);
    // A claim of ~4 GiB: refused before any allocation.
    let huge = with_paylen(segs[0], u32::MAX - 100);
    let (mut rx, p) = Receiver::new(at(0), &huge, &cfg());
    assert_eq!(p, failed(RmppStatus::BadLength, true));
    assert_nack(
        &drain_receiver(&mut rx, at(0)),
        &huge,
        RmppType::Abort,
        RmppStatus::BadLength,
    );
    let small = RmppConfig {
        max_message: 600,
        ..cfg()
    };
    let (_, p) = Receiver::new(at(0), &segs[0], &small);
    assert_eq!(p, failed(RmppStatus::BadLength, true), "656 bytes > 600");
}

#[test]
fn bad_length_last_inconsistent_with_total() {
    let segs = segments(SA, 200 * 3 - 10);
    // The last segment's PayloadLength disagrees with the first's total.
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    rx.handle_data(at(1), &segs[1]);
    let bad_last = with_paylen(segs[2], 200);
    assert_eq!(
        rx.handle_data(at(1), &bad_last),
        failed(RmppStatus::BadLength, true)
    );
    // Last arrives earlier than announced.
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    let mut early_last = segs[1];
    early_last[26] |= rmpp::FLAG_LAST;
    assert_eq!(
        rx.handle_data(at(1), &early_last),
        failed(RmppStatus::BadLength, true)
    );
    // A first segment announcing one segment but not Last.
    let (_, p) = Receiver::new(at(0), &with_paylen(segs[0], 100), &cfg());
    assert_eq!(p, failed(RmppStatus::BadLength, true));
    // Unannounced length, last PayloadLength removing more than the segment holds.
    let (mut rx, _) = Receiver::new(at(0), &with_paylen(segs[0], 0), &cfg());
    rx.handle_data(at(1), &segs[1]);
    assert_eq!(
        rx.handle_data(at(1), &with_paylen(segs[2], 10)),
        failed(RmppStatus::BadLength, true)
    );
}

#[test]
fn unannounced_transfer_beyond_max_message_is_stopped() {
    let segs = segments(SA, 200 * 10);
    let small = RmppConfig {
        max_message: 56 + 200 * 4,
        ..cfg()
    };
    let (mut rx, p) = Receiver::new(at(0), &with_paylen(segs[0], 0), &small);
    assert_eq!(p, Progress::Pending);
    for s in &segs[1..4] {
        assert_eq!(rx.handle_data(at(1), s), Progress::Pending);
    }
    drain_receiver(&mut rx, at(1));
    assert_eq!(
        rx.handle_data(at(1), &segs[4]),
        failed(RmppStatus::ResourcesExhausted, true)
    );
    assert_nack(
        &drain_receiver(&mut rx, at(1)),
        &segs[4],
        RmppType::Stop,
        RmppStatus::ResourcesExhausted,
    );
}

#[test]
fn total_time_too_long() {
    let segs = segments(SA, 200 * 3);
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    drain_receiver(&mut rx, at(0));
    assert_eq!(rx.deadline(), Some(at(40_000)));
    assert_eq!(rx.handle_timeout(at(39_999)), Progress::Pending);
    assert_eq!(
        rx.handle_timeout(at(40_000)),
        failed(RmppStatus::TotalTimeTooLong, true)
    );
    assert_nack(
        &drain_receiver(&mut rx, at(40_000)),
        &segs[0],
        RmppType::Abort,
        RmppStatus::TotalTimeTooLong,
    );
    assert_eq!(rx.deadline(), None);
    assert_eq!(
        rx.handle_data(at(40_001), &segs[1]),
        failed(RmppStatus::TotalTimeTooLong, false)
    );
}

#[test]
fn linger_reack_then_expiry() {
    let segs = segments(SA, 200 * 3);
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    rx.handle_data(at(1), &segs[1]);
    assert_eq!(rx.handle_data(at(2), &segs[2]), Progress::Complete);
    assert!(rx.is_lingering());
    let ack = drain_receiver(&mut rx, at(2));
    assert_eq!(
        rmpp_of(&ack[0]),
        (RmppType::Ack, RmppStatus::Success, 3, 65)
    );
    assert!(rx.take_message().is_some());
    assert_eq!(rx.deadline(), Some(at(10_002)));
    // A retransmit of any segment of the window is answered with the final ACK.
    for s in &segs {
        assert_eq!(rx.handle_data(at(5000), s), Progress::Complete);
        let again = drain_receiver(&mut rx, at(5000));
        assert_eq!(
            rmpp_of(&again[0]),
            (RmppType::Ack, RmppStatus::Success, 3, 65)
        );
    }
    assert_eq!(rx.take_message(), None);
    assert_eq!(rx.handle_timeout(at(10_001)), Progress::Pending);
    assert_eq!(
        rx.handle_timeout(at(10_002)),
        Progress::Complete,
        "drop it now"
    );
}

#[test]
fn single_segment_completes_at_once() {
    let segs = segments(VENDOR, 5);
    let (mut rx, p) = Receiver::new(at(0), &segs[0], &cfg());
    assert_eq!(p, Progress::Complete);
    let ack = drain_receiver(&mut rx, at(0));
    assert_eq!(rmpp_of(&ack[0]), (RmppType::Ack, RmppStatus::Success, 1, 1));
    assert_eq!(rx.take_message().unwrap().len(), 45);
}

#[test]
fn abort_from_sender_ends_silently_and_ds_ack_sets_reply_window() {
    let segs = segments(SA, 200 * 3);
    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    drain_receiver(&mut rx, at(0));
    let abort = reply(&segs[0], RmppType::Abort, 127, 0, 0);
    assert_eq!(
        rx.handle_rmpp(at(1), &abort),
        failed(RmppStatus::Unspecified, false)
    );
    assert!(drain_receiver(&mut rx, at(1)).is_empty());

    let (mut rx, _) = Receiver::new(at(0), &segs[0], &cfg());
    rx.handle_data(at(0), &segs[1]);
    rx.handle_data(at(0), &segs[2]);
    assert_eq!(rx.reply_window(), 1);
    let ds = reply(&segs[0], RmppType::Ack, 0, 0, 7);
    assert_eq!(rx.handle_rmpp(at(1), &ds), Progress::Complete);
    assert_eq!(rx.reply_window(), 7);
}

/// The first segment of a 3-segment SA GetTableResp (660 = 3 × 220), and
/// the ACK the kernel's `format_ack` answers it with, byte for byte.
#[test]
fn ack_bytes_match_kernel_format_ack() {
    let mut seg = [0u8; MAD_SIZE];
    seg[..56].copy_from_slice(&[
        0x01, 0x03, 0x02, 0x92, 0x00, 0x00, 0x00, 0x00, // base, SA, v2, GetTableResp, status
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x2a, // TID
        0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // NodeRecord, attr mod
        0x01, 0x01, 0xfb, 0x00, 0x00, 0x00, 0x00,
        0x01, // RMPP v1 DATA, rtime 0x1f | Active|First, seg 1
        0x00, 0x00, 0x02, 0x94, // PayloadLength 660
        0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x08, 0x00, 0x00, // SM_Key, AttributeOffset 8
        0, 0, 0, 0, 0, 0, 0, 0x01, // ComponentMask
    ]);
    seg[56..].fill(0x77);
    let (mut rx, p) = Receiver::new(at(0), &seg, &cfg());
    assert_eq!(p, Progress::Pending);
    let ack = drain_receiver(&mut rx, at(0));
    let mut want = [0u8; MAD_SIZE];
    want[..56].copy_from_slice(&seg[..56]);
    want[3] = 0x12; // GetTable: the response bit flipped
    want[24..36].copy_from_slice(&[
        0x01, 0x02, 0xf9, 0x00, // v1, ACK, rtime 0x1f | Active, status 0
        0x00, 0x00, 0x00, 0x01, // segment 1
        0x00, 0x00, 0x00, 0x41, // NewWindowLast 65
    ]);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0], want);
}

/// The DATA segments a kernel sender puts on the wire for `message` (written
/// here from the kernel's RMPP sender, not with vmad's `Sender`): `get_pad_size` (a zero-
/// length message is one segment of padding), PayloadLength = segments × 220
/// − pad in the first, 220 − pad in the last (which wins in a single
/// segment), 0 in the middle ones.
fn kernel_segments(message: &[u8], hdr_len: usize) -> Vec<[u8; MAD_SIZE]> {
    let per_seg = MAD_SIZE - hdr_len;
    let data = &message[hdr_len..];
    let pad = match data.len() % per_seg {
        _ if data.is_empty() => per_seg,
        0 => 0,
        r => per_seg - r,
    };
    let count = (data.len() + pad) / per_seg;
    (1..=count)
        .map(|seg| {
            let mut m = [0u8; MAD_SIZE];
            m[..hdr_len].copy_from_slice(&message[..hdr_len]);
            let chunk = data.chunks(per_seg).nth(seg - 1).unwrap_or(&[]);
            m[hdr_len..hdr_len + chunk.len()].copy_from_slice(chunk);
            let mut paylen = 0;
            let mut flags = rmpp::FLAG_ACTIVE;
            if seg == 1 {
                flags |= rmpp::FLAG_FIRST;
                paylen = (count * rmpp::SEGMENT_PAYLOAD - pad) as u32;
            }
            if seg == count {
                flags |= rmpp::FLAG_LAST;
                paylen = (rmpp::SEGMENT_PAYLOAD - pad) as u32;
            }
            let mut p = Packet::new_unchecked(&mut m[..]);
            p.set_rmpp_version(rmpp::VERSION);
            p.set_rmpp_type(RmppType::Data);
            p.set_resp_time_flags(0x1f, flags);
            p.set_rmpp_status(RmppStatus::Success);
            p.set_seg_num(seg as u32);
            p.set_paylen_newwin(paylen);
            m
        })
        .collect()
}

#[test]
fn every_kernel_sender_payload_length_is_accepted() {
    for class in [SA, VENDOR, DM] {
        let hdr = hdr_of(class);
        let per_seg = MAD_SIZE - hdr;
        let mut lens = vec![0, 1, 2, 19, 20, 21, 100_000];
        for k in 1..=4 {
            lens.extend([k * per_seg - 1, k * per_seg, k * per_seg + 1]);
        }
        for data_len in lens {
            let want = message(class, hdr, data_len);
            let segs = kernel_segments(&want, hdr);
            let (mut rx, mut p) = Receiver::new(at(0), &segs[0], &cfg());
            for s in &segs[1..] {
                assert_eq!(p, Progress::Pending, "class {class:#x}, {data_len} bytes");
                p = rx.handle_data(at(1), s);
            }
            assert_eq!(p, Progress::Complete, "class {class:#x}, {data_len} bytes");
            let replies = drain_receiver(&mut rx, at(1));
            assert!(
                replies.iter().all(|r| r[25] == u8::from(RmppType::Ack)),
                "only ACKs, class {class:#x}, {data_len} bytes"
            );
            let m = rx.take_message().unwrap();
            assert_eq!(m.len(), hdr + data_len, "kernel get_mad_len");
            assert_eq!(&m[36..], &want[36..]);
        }
    }
}
