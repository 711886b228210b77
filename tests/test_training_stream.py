"""The training stream's position in checkpoints (t2t_lite/training/stream.py), with the
default strategy and small datasets; tests/test_trainer_resume.py covers two replicas and
whole runs."""
import tensorflow as tf

from t2t_lite.training.stream import DATA_POSITION, has_data_position, open_stream

STRATEGY = tf.distribute.get_strategy()


def shuffled(input_context):
    return tf.data.Dataset.range(1000).shuffle(50, seed=3).batch(4)


def doubled(input_context):
    return tf.data.Dataset.range(1000).map(lambda x: 2 * x).batch(4)


def opened(dataset_fn, checkpoint, restored=None, batches_done=0):
    return open_stream(STRATEGY, dataset_fn, checkpoint, restored=restored,
                       batches_done=batches_done, multi_worker=False)


def read(stream, count):
    return [stream.take(stream.iterator).numpy().tolist() for _ in range(count)]


def saved_after(dataset_fn, batches, directory):
    """A checkpoint of a stream that has given ``batches`` batches, and those batches."""
    checkpoint = tf.train.Checkpoint()
    given = read(opened(dataset_fn, checkpoint), batches)
    return checkpoint.save(str(directory / "ckpt")), given


def restored_stream(dataset_fn, path, batches_done):
    checkpoint = tf.train.Checkpoint()
    checkpoint.restore(path)
    return opened(dataset_fn, checkpoint, path, batches_done), checkpoint


def test_a_resumed_stream_continues_from_the_saved_position_reading_nothing(tmp_path,
                                                                          capsys):
    uninterrupted = read(opened(shuffled, tf.train.Checkpoint()), 12)
    path, given = saved_after(shuffled, 7, tmp_path)
    assert has_data_position(path)
    stream, _ = restored_stream(shuffled, path, batches_done=7)
    assert stream.skipped == 0
    assert given + read(stream, 5) == uninterrupted
    assert "Reading" not in capsys.readouterr().out


def test_a_checkpoint_without_a_position_is_resumed_by_reading_past_the_batches(tmp_path,
                                                                             capsys):
    uninterrupted = read(opened(shuffled, tf.train.Checkpoint()), 12)
    path = tf.train.Checkpoint(step=tf.Variable(7)).save(str(tmp_path / "ckpt"))
    assert not has_data_position(path)
    stream, checkpoint = restored_stream(shuffled, path, batches_done=7)
    assert stream.skipped == 7
    assert ("Reading the seeded training data past the batches already trained on (7 per "
            "replica)") in capsys.readouterr().out
    assert read(stream, 3) == uninterrupted[7:10]
    # Its next save holds a position that a stream opened the usual way restores.
    later = checkpoint.save(str(tmp_path / "later"))
    again, _ = restored_stream(shuffled, later, batches_done=10)
    assert again.skipped == 0 and read(again, 2) == uninterrupted[10:12]


def test_a_position_of_another_pipeline_warns_and_falls_back_to_reading(tmp_path, capsys):
    path, _ = saved_after(shuffled, 5, tmp_path)
    stream, checkpoint = restored_stream(doubled, path, batches_done=5)
    warning = capsys.readouterr().err
    assert warning.startswith(f"warning: the data position saved in {path} does not fit")
    assert "reading the training data past the batches already trained on" in warning
    assert stream.skipped == 5
    uninterrupted = read(opened(doubled, tf.train.Checkpoint()), 9)
    assert read(stream, 2) == uninterrupted[5:7]
    assert getattr(checkpoint, DATA_POSITION) is stream.iterator
    # The run's next save holds the new pipeline's position, which then restores.
    later = checkpoint.save(str(tmp_path / "later"))
    again, _ = restored_stream(doubled, later, batches_done=7)
    assert again.skipped == 0 and read(again, 2) == uninterrupted[7:9]


def test_a_new_run_reads_from_the_first_batch():
    stream = opened(shuffled, tf.train.Checkpoint(), restored=None, batches_done=0)
    assert stream.skipped == 0
    assert read(stream, 3) == read(opened(shuffled, tf.train.Checkpoint()), 3)


def test_workers_read_past_their_batches_and_announce_it_only_when_there_are_some(tmp_path,
                                                                                capsys):
    uninterrupted = read(opened(shuffled, tf.train.Checkpoint()), 10)
    path = tf.train.Checkpoint().save(str(tmp_path / "ckpt"))

    def as_worker(batches_done):
        return open_stream(STRATEGY, shuffled, tf.train.Checkpoint(), restored=path,
                           batches_done=batches_done, multi_worker=True)

    at_start = as_worker(0)
    assert at_start.skipped == 0 and "Reading" not in capsys.readouterr().out
    assert read(at_start, 2) == uninterrupted[:2]
    later = as_worker(7)
    assert "(7 per replica)" in capsys.readouterr().out
    assert later.skipped == 7 and read(later, 3) == uninterrupted[7:10]
