//! The tensor store: packing, freeing with the tensors above moving down, refusals that change
//! nothing, and a product's output on top of its operands.

extern crate std;
use super::*;
use std::vec;

fn le(words: &[i16]) -> std::vec::Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn tensors_pack_and_free_moves_the_ones_above_down() {
    let mut words = vec![0i16; 16];
    let mut s = TensorStore::new(&mut words);
    s.write(1, 2, 2, 0, &le(&[1, 2, 3, 4])).unwrap();
    s.write(2, 1, 3, 0, &le(&[5, 6])).unwrap();
    s.write(2, 1, 3, 2, &le(&[7])).unwrap();
    s.write(3, 2, 1, 0, &le(&[8, 9])).unwrap();
    assert_eq!(s.free_words(), 16 - 9);
    s.free(1).unwrap();
    assert_eq!(s.free_words(), 16 - 5);
    assert_eq!(s.get(2).unwrap().words, &[5, 6, 7]);
    assert_eq!(s.get(3).unwrap().words, &[8, 9]);
    assert_eq!((s.get(3).unwrap().rows, s.get(3).unwrap().cols), (2, 1));
    assert_eq!(s.get(1).unwrap_err(), StoreError::UnknownId(1));
    // Re-creating an id replaces it (the old words freed first).
    s.write(2, 2, 2, 0, &le(&[10, 11, 12, 13])).unwrap();
    assert_eq!(s.get(3).unwrap().words, &[8, 9]);
    assert_eq!(s.get(2).unwrap().words, &[10, 11, 12, 13]);
    assert_eq!(s.free_words(), 16 - 6);
}

#[test]
fn refusals_change_nothing() {
    let mut words = vec![0i16; 8];
    let mut s = TensorStore::new(&mut words);
    s.write(1, 2, 2, 0, &le(&[1, 2, 3, 4])).unwrap();
    assert_eq!(
        s.write(2, 3, 2, 0, &le(&[0; 6])),
        Err(StoreError::Full { needed: 6, free: 4 })
    );
    // Replacing 1 by a tensor of 8 words fits once 1's words are counted as free.
    assert_eq!(
        s.write(1, 3, 3, 0, &[]),
        Err(StoreError::Full { needed: 9, free: 8 })
    );
    assert_eq!(s.get(1).unwrap().words, &[1, 2, 3, 4]);
    // A chunk of another shape, past the end, of an unknown id.
    assert_eq!(s.write(1, 4, 1, 2, &le(&[9])), Err(StoreError::Range));
    assert_eq!(s.write(1, 2, 2, 3, &le(&[9, 9])), Err(StoreError::Range));
    assert_eq!(
        s.write(7, 2, 2, 1, &le(&[9])),
        Err(StoreError::UnknownId(7))
    );
    // A free list with an unknown id frees nothing.
    assert_eq!(s.free_list(&[1, 7], 0xFF), Err(StoreError::UnknownId(7)));
    assert_eq!(s.get(1).unwrap().words, &[1, 2, 3, 4]);
    s.free_list(&[0xFF], 0xFF).unwrap();
    assert_eq!(s.free_words(), 8);
}

#[test]
fn the_table_has_room_for_max_tensors() {
    let mut words = vec![0i16; 64];
    let mut s = TensorStore::new(&mut words);
    for id in 0..MAX_TENSORS as u8 {
        s.create(id, 1, 1).unwrap();
    }
    assert_eq!(s.create(100, 1, 1), Err(StoreError::TooMany));
    // Replacing one needs no new entry.
    s.create(3, 2, 2).unwrap();
}

#[test]
fn a_product_output_goes_on_top_of_its_operands() {
    let mut words = vec![0i16; 12];
    let mut s = TensorStore::new(&mut words);
    s.write(0, 1, 2, 0, &le(&[1, 2])).unwrap();
    s.write(1, 1, 2, 0, &le(&[3, 4])).unwrap();
    s.write(2, 1, 3, 0, &le(&[5, 6, 7])).unwrap();
    // An old output 0, below the operands, is freed and they move down.
    let (view, out) = s.output(0, 2, 2).unwrap();
    assert_eq!(view.get(1).unwrap().words, &[3, 4]);
    assert_eq!(view.get(2).unwrap().words, &[5, 6, 7]);
    assert_eq!(view.get(0).unwrap_err(), StoreError::UnknownId(0));
    out.copy_from_slice(&[9, 9, 9, 9]);
    assert_eq!(s.get(0).unwrap().words, &[9, 9, 9, 9]);
    assert_eq!(s.get(2).unwrap().words, &[5, 6, 7]);
    assert_eq!(
        s.output(5, 3, 2).err(),
        Some(StoreError::Full { needed: 6, free: 3 })
    );
}
