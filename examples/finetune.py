"""A fine-tuning script with the mistakes PyTorch forum threads are made of."""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(16, 1000)
        self.temperature = nn.Parameter(torch.ones(1)).cuda()

    def forward(self, x):
        return self.fc(self.features(x)) / self.temperature


def finetune(device="cuda"):
    model = Backbone()
    model.to(device)  # a Module moves in place: fine
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    # Replace the head for 10 classes... after the optimizer was built.
    model.fc = nn.Linear(16, 10)

    # Load pretrained weights into the first conv, three different wrong ways.
    pretrained = torch.randn(16, 3, 3, 3)
    model.features[0].weight.data = pretrained
    layer = nn.Linear(16, 10)
    layer.weight = torch.randn(10, 16)

    x = torch.randn(8, 3, 32, 32)
    x.to(device)  # the result is thrown away: x stays on the CPU
    target = Variable(torch.LongTensor(8).random_(0, 10))
    loss = nn.functional.cross_entropy(model(x), target)
    loss.backward()
    optimizer.step()
    return model
