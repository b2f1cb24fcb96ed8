"""A video classifier that pools a fixed clip (16 frames of 224 x 224, as torchvision's S3D and
MViT do): smaller guesses pool down to nothing, so only the full clip size fits."""
import torch.nn as nn


class ClipClassifier(nn.Module):
    def __init__(self, classes=2):
        super().__init__()
        self.patches = nn.Conv3d(3, 8, kernel_size=(1, 32, 32), stride=(1, 32, 32))
        self.pool = nn.AvgPool3d((16, 7, 7))
        self.head = nn.Linear(8, classes)

    def forward(self, clip):
        return self.head(self.pool(self.patches(clip)).flatten(1))
