"""Claims of docs/data-movement/data-loading.md."""

import itertools
import os

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

pytestmark = pytest.mark.snippet("snippets/data_movement/data_loading.py")


class WhoLoadedMe(Dataset):
    """Returns the id of the process that produced each item."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        return os.getpid()


def usable_cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def test_items_are_deterministic(snippet):
    dataset = snippet.ParsedRecords(8, 32)
    x, index = dataset[5]
    assert index == 5 and x.shape == (32,) and x.dtype == torch.float32
    assert torch.equal(x, dataset[5][0])
    assert not torch.equal(x, dataset[6][0])


def test_workers_deliver_every_item_once_and_unchanged(snippet):
    dataset = snippet.ParsedRecords(40, 16)
    seen = []
    for x, index in snippet.make_loader(dataset, num_workers=2, batch_size=8):
        for row, i in zip(x, index.tolist(), strict=True):
            assert torch.equal(row, dataset[i][0])
            seen.append(i)
    assert sorted(seen) == list(range(40))


def test_workers_keep_the_sampler_order(snippet):
    dataset = snippet.ParsedRecords(40, 16)
    loader = snippet.make_loader(dataset, num_workers=2, batch_size=8, shuffle=False)
    order = [i for _, index in loader for i in index.tolist()]
    assert order == list(range(40))


def test_prefetch_factor_needs_workers(snippet):
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(snippet.dataset, num_workers=0, prefetch_factor=2)
    assert snippet.make_loader(snippet.dataset, 0).prefetch_factor is None


def test_workers_are_other_processes_and_persistent_ones_are_reused():
    def pids(loader):
        return {int(p) for batch in loader for p in batch}

    persistent = DataLoader(WhoLoadedMe(), batch_size=2, num_workers=2, persistent_workers=True)
    first, second = pids(persistent), pids(persistent)
    assert os.getpid() not in first and len(first) == 2
    assert first == second
    fresh = DataLoader(WhoLoadedMe(), batch_size=2, num_workers=2)
    assert pids(fresh).isdisjoint(pids(fresh))  # new worker processes every epoch
    assert pids(DataLoader(WhoLoadedMe(), batch_size=2)) == {os.getpid()}  # num_workers=0


@pytest.mark.timed
def test_run_epoch_and_throughput_helpers(snippet):
    dataset = snippet.ParsedRecords(32, 16)
    assert snippet.run_epoch(snippet.make_loader(dataset, 0)) == 32
    assert snippet.items_per_second(dataset, 0, epochs=1) > 0
    assert snippet.time_to_first_batch(dataset, 1) > 0


@pytest.mark.skipif(usable_cores() < 8, reason="a claim about a machine with 8 or more cores")
@pytest.mark.timed
def test_workers_multiply_throughput_of_a_cpu_bound_dataset(snippet):
    dataset = snippet.ParsedRecords(256, 1536)  # the page's per-item work, whatever the device
    none = snippet.items_per_second(dataset, 0, epochs=1)
    four = snippet.items_per_second(dataset, 4, epochs=2)
    assert four > 2 * none, (none, four)


def reference_crop_and_flip(image, top, left, flip, pad=4):
    _, h, w = image.shape
    padded = torch.zeros(image.shape[0], h + 2 * pad, w + 2 * pad, dtype=image.dtype)
    padded[:, pad:pad + h, pad:pad + w] = image
    window = padded[:, top:top + h, left:left + w]
    return window.flip(-1) if flip else window


def test_batched_crop_and_flip_matches_one_image_at_a_time(snippet):
    torch.manual_seed(0)
    images = torch.randint(0, 256, (16, 3, 32, 32), dtype=torch.uint8)
    top, left = torch.randint(0, 9, (16,)), torch.randint(0, 9, (16,))
    flip = torch.rand(16) < 0.5
    out = snippet.crop_and_flip(images, top, left, flip)
    assert out.shape == images.shape and out.dtype == torch.uint8
    for i in range(16):
        expected = reference_crop_and_flip(images[i], top[i].item(), left[i].item(), flip[i].item())
        assert torch.equal(out[i], expected)


def is_some_crop(out, image):
    return any(torch.equal(out.cpu(), reference_crop_and_flip(image.cpu(), t, left, f))
               for t, left, f in itertools.product(range(9), range(9), (False, True)))


def test_augment_draws_a_crop_and_flip_for_each_image(snippet):
    images, _ = snippet.random_images(4)
    out = snippet.augment(images)
    assert out.device == images.device and out.shape == images.shape
    assert all(is_some_crop(out[i], images[i]) for i in range(4))


def test_cpu_dataset_returns_the_same_kind_of_crops(snippet):
    images, labels = snippet.random_images(4)
    dataset = snippet.CropFlipImages(images, labels)
    for i in range(4):
        image, label = dataset[i]
        assert is_some_crop(image, images[i]) and label == labels[i].cpu()


def test_both_pipelines_see_every_image_once_and_hand_floats_on_the_device_to_the_step(snippet):
    images, labels = snippet.random_images(1000)
    batches = []

    def train_step(x, y):
        assert x.device == images.device and x.dtype == torch.float32
        assert x.shape[1:] == (3, 32, 32) and 0 <= x.min() and x.max() <= 1
        assert y.device == images.device and len(y) == len(x)
        batches.append(len(y))

    assert snippet.gpu_epoch(images, labels, train_step) == 1000 == sum(batches)
    batches.clear()
    loader = snippet.make_image_loader(images, labels)
    assert snippet.dataloader_epoch(loader, train_step) == 1000 == sum(batches)


@pytest.mark.gpus(1)
def test_batches_arrive_pinned(snippet):
    x, _ = next(iter(snippet.make_loader(snippet.ParsedRecords(8, 16), num_workers=1)))
    assert x.is_pinned()


@pytest.mark.gpus(1)
def test_cuda_in_a_forked_worker_raises(snippet):
    with pytest.raises(RuntimeError, match="Cannot re-initialize CUDA in forked subprocess"):
        snippet.load_on_gpu_in_workers("fork")


@pytest.mark.gpus(1)
def test_spawned_workers_can_use_cuda(snippet):
    out = snippet.load_on_gpu_in_workers("spawn")
    expected = 2 * torch.arange(64, dtype=torch.float32).view(64, 1).expand(64, 256)
    assert torch.equal(out, expected)


@pytest.mark.gpus(1)
@pytest.mark.timed
def test_gpu_resident_pipeline_beats_the_dataloader(snippet):
    import time

    images, labels = snippet.random_images(snippet.n_images)
    loader = snippet.make_image_loader(images, labels)

    def rate(epoch):
        epoch()  # warm-up; starts the workers
        start = time.perf_counter()
        seen = epoch()
        return seen / (time.perf_counter() - start)

    on_gpu = rate(lambda: snippet.gpu_epoch(images, labels))
    with_loader = rate(lambda: snippet.dataloader_epoch(loader))
    assert on_gpu > 2 * with_loader, (on_gpu, with_loader)


# --- The page's claims against every recorded run of every GPU (timings/; runs in CI) ---

CLAIMS = {"worker_speedup": 3}


def test_workers_multiply_the_throughput_in_every_run(measured):
    names = [f"data_loading.loader[{n}]" for n in (0, 1, 2, 4, 8)]
    for run in measured(*names):
        alone = run.value(names[0], "items_per_s")
        best = max(run.value(n, "items_per_s") for n in names[1:])
        assert best >= CLAIMS["worker_speedup"] * alone, (run, best, alone)


def test_gpu_resident_augmentation_beats_the_dataloader_in_every_run(measured):
    names = ("data_loading.augment[gpu]", "data_loading.augment[dataloader]")
    for run in measured(*names):
        assert run.value(names[0], "items_per_s") > run.value(names[1], "items_per_s"), run
