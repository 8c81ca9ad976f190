#!/usr/bin/python3
"""Writes scikit-learn's 8x8 digits, a small CNN's initial weights and what PyTorch reaches
training it, so kiln's eager training (tests/train, samples/train) can be held to PyTorch's.

  /usr/bin/python3 samples/train/export_digits.py --out DIR

DIR/manifest.txt lists one tensor a line, `name dtype dims file` (dims `8x8`, `-` for a scalar),
each stored raw little-endian in DIR/<file>, then `setting name value` lines:
  - images_train, labels_train, images_test, labels_test: the 1,797 digits split 80/20 by a
    seeded permutation, pixels scaled to [0, 1], images [N, 1, 8, 8] f32, labels i64;
  - order: [epochs, N_train] i64, the training samples' order in each epoch; batches are its
    consecutive runs of batch_size (the last one shorter);
  - cnn.<param>: DigitsCnn's initial state_dict (torch.manual_seed(0));
  - settings: epochs, batch_size, lr, momentum, and torch_test_accuracy, the held-out accuracy
    (percent) after training with torch.optim.SGD on that order, its learning rate annealed per
    epoch by CosineAnnealingLR(T_max=epochs), and torch_final_loss, the last epoch's mean
    training loss.
Exits 77 (CTest's skip code) when torch or scikit-learn is missing.
"""
import argparse
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from sklearn.datasets import load_digits
except ImportError as e:
    print(f"export_digits: SKIPPED: {e} (tools/setup.sh --with-torch installs it)")
    sys.exit(77)

EPOCHS = 5
BATCH_SIZE = 32
LR = 0.05
MOMENTUM = 0.9
TEST_FRACTION = 0.2


class DigitsCnn(nn.Module):
    """samples/train/digits.h DigitsCnn: conv 1->8 3x3 pad 1, batch norm, relu, max pool 2,
    conv 8->16 3x3, relu, flatten, linear 64->10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        y = F.relu(self.conv2(y))
        return self.fc(torch.flatten(y, 1))


def write(out, manifest, name, array):
    array = np.array(array, order="C")
    dtype = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64"}[array.dtype]
    dims = "x".join(str(d) for d in array.shape) or "-"
    file = name + ".bin"
    array.astype(array.dtype.newbyteorder("<")).tofile(os.path.join(out, file))
    manifest.append(f"{name} {dtype} {dims} {file}")


def accuracy(model, images, labels):
    model.eval()
    with torch.no_grad():
        predicted = model(images).argmax(1)
    model.train()
    return 100.0 * float((predicted == labels).float().mean())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # the same sums in the same order on every run

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    split = np.random.RandomState(0).permutation(len(labels))
    n_test = int(round(len(labels) * TEST_FRACTION))
    test, train = split[:n_test], split[n_test:]
    order = np.stack([np.random.RandomState(1 + e).permutation(len(train)) for e in range(EPOCHS)])

    torch.manual_seed(0)
    model = DigitsCnn()
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}

    x_train, y_train = torch.from_numpy(images[train]), torch.from_numpy(labels[train])
    x_test, y_test = torch.from_numpy(images[test]), torch.from_numpy(labels[test])
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS)
    for epoch in range(EPOCHS):
        losses = []
        for start in range(0, len(train), BATCH_SIZE):
            batch = torch.from_numpy(order[epoch, start:start + BATCH_SIZE])
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
        scheduler.step()
        final_loss = sum(losses) / len(losses)
        print(f"epoch {epoch + 1}: loss {final_loss:.4f}, "
              f"held-out accuracy {accuracy(model, x_test, y_test):.2f}%")
    test_accuracy = accuracy(model, x_test, y_test)

    manifest = []
    write(args.out, manifest, "images_train", images[train])
    write(args.out, manifest, "labels_train", labels[train])
    write(args.out, manifest, "images_test", images[test])
    write(args.out, manifest, "labels_test", labels[test])
    write(args.out, manifest, "order", order.astype(np.int64))
    for key, value in initial.items():
        write(args.out, manifest, "cnn." + key, value.numpy())
    settings = {"epochs": EPOCHS, "batch_size": BATCH_SIZE, "lr": LR, "momentum": MOMENTUM,
                "torch_test_accuracy": f"{test_accuracy:.4f}",
                "torch_final_loss": f"{final_loss:.6f}"}
    manifest += [f"setting {k} {v}" for k, v in settings.items()]
    with open(os.path.join(args.out, "manifest.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    print(f"export_digits: {len(train)} training and {len(test)} held-out digits, "
          f"PyTorch {test_accuracy:.2f}% after {EPOCHS} epochs, in {args.out}")


if __name__ == "__main__":
    main()
