# training-like loop: a DataLoader without workers whose dataset does Python work per item,
# metrics logged as JSON every step, a checkpoint pickled every 20 steps
import json, pickle, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 10_000_000

    def __getitem__(self, i):
        vals = [((i * 31 + k) % 97) / 97.0 for k in range(400)]
        return torch.tensor(vals), i % 10

def main(dur):
    loader = DataLoader(Items(), batch_size=32, num_workers=2)
    model = torch.nn.Linear(400, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    history = []
    t0 = time.time()
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        history.append({"step": step, "loss": float(loss), "lr": 0.01, "tags": list(range(50))})
        line = json.dumps(history)
        if step % 20 == 0:
            blob = pickle.dumps(history)
        if time.time() - t0 > dur:
            break
    print("steps", step, len(line), len(blob))

if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0)
